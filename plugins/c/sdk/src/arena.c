/* Bump allocator: one list of blocks, freed at once. */
#include <stdlib.h>
#include <string.h>

#include "wr_json.h"

#define WR_BLOCK_SIZE (64 * 1024)
#define WR_ALIGN 16

typedef struct wr_block {
    struct wr_block *next;
    size_t used, size;
    _Alignas(WR_ALIGN) unsigned char data[];
} wr_block;

struct wr_arena {
    wr_block *head;
};

wr_arena *wr_arena_new(void) {
    return calloc(1, sizeof(wr_arena));
}

void wr_arena_free(wr_arena *arena) {
    if (!arena) return;
    wr_block *b = arena->head;
    while (b) {
        wr_block *next = b->next;
        free(b);
        b = next;
    }
    free(arena);
}

void *wr_alloc(wr_arena *arena, size_t size) {
    if (!arena) return NULL;
    size_t need = (size + WR_ALIGN - 1) & ~(size_t)(WR_ALIGN - 1);
    if (need < size) return NULL; /* overflow */
    wr_block *b = arena->head;
    if (!b || b->size - b->used < need) {
        size_t cap = need > WR_BLOCK_SIZE ? need : WR_BLOCK_SIZE;
        b = malloc(sizeof(wr_block) + cap);
        if (!b) return NULL;
        b->used = 0;
        b->size = cap;
        b->next = arena->head;
        arena->head = b;
    }
    void *p = b->data + b->used;
    b->used += need;
    memset(p, 0, size);
    return p;
}

char *wr_strndup(wr_arena *arena, const char *s, size_t len) {
    char *p = wr_alloc(arena, len + 1);
    if (!p) return NULL;
    if (len) memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

char *wr_strdup(wr_arena *arena, const char *s) {
    return wr_strndup(arena, s, strlen(s));
}
