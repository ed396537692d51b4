/* Native unit tests of the C SDK and the static-site port (built with the
 * host's C compiler by plugins/c/build.sh). Expected hashes come from
 * sha256sum; cases mirror plugins/static-site/src/tests.rs. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../static-site/spec.h"
#include "wr_plugin.h"

static int passed, failed;
static const char *current;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (cond) {                                                                 \
            passed++;                                                               \
        } else {                                                                    \
            failed++;                                                               \
            fprintf(stderr, "FAIL %s (%s:%d): %s\n", current, __FILE__, __LINE__, #cond); \
        }                                                                           \
    } while (0)
#define CHECK_STR(got, want)                                                                      \
    do {                                                                                          \
        const char *g_ = (got), *w_ = (want);                                                     \
        if (g_ && strcmp(g_, w_) == 0) {                                                          \
            passed++;                                                                             \
        } else {                                                                                  \
            failed++;                                                                             \
            fprintf(stderr, "FAIL %s (%s:%d): got \"%s\", want \"%s\"\n", current, __FILE__, __LINE__, \
                    g_ ? g_ : "(null)", w_);                                                      \
        }                                                                                         \
    } while (0)

static wr_json *parse(wr_arena *a, const char *text) { return wr_json_parse(a, text, strlen(text), NULL); }

static void test_sha256(wr_arena *a) {
    current = "sha256";
    CHECK_STR(wr_content_hash(a, "abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK_STR(wr_content_hash(a, "", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    CHECK_STR(wr_content_hash(a, two, strlen(two)), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    CHECK_STR(wr_content_hash(a, "index.html\0hi\0", 14), "91060b282a73cb28480f87cd3654ce9941bfee159fc0068c853984453bfc1939");
}

static void test_names(wr_arena *a) {
    current = "child names";
    CHECK_STR(wr_child_name(a, "web", "config"), "web-config");
    CHECK_STR(wr_child_name(a, "web", ""), "web");
    CHECK_STR(wr_child_name(a, "my-site", "web"), "my-site-web");
    char long_name[71];
    memset(long_name, 'a', 70);
    long_name[70] = '\0';
    char *n = wr_child_name(a, long_name, "svc");
    CHECK(n && strlen(n) == 63 && wr_is_dns1123_label(n) && strncmp(n, long_name, 52) == 0 && n[52] == '-');
    CHECK(n && strcmp(n, wr_child_name(a, long_name, "cfg")) != 0);
    char *odd = wr_child_name(a, "My.Site", "web");
    CHECK(odd && strncmp(odd, "my-site-web-", 12) == 0 && strlen(odd) == 22);
    /* A non-ASCII character is one '-' (one per code point, as in Rust). */
    char *u = wr_child_name(a, "\xc3\xbc" "x", "");
    CHECK(u && strncmp(u, "x-", 2) == 0 && strlen(u) == 12);
    CHECK(strlen(wr_child_name(a, "---", "")) == 10);
    CHECK(!wr_is_dns1123_label("-a") && !wr_is_dns1123_label("A") && wr_is_dns1123_label("a-1"));
}

static void test_json(wr_arena *a) {
    current = "json";
    const char *text = "{\"b\":[1,-2.5e3,true,null],\"a\":\"x\\\"\\u00e9\\ud83d\\ude00\\n\",\"b\":{}}";
    const char *error = NULL;
    wr_json *v = wr_json_parse(a, text, strlen(text), &error);
    CHECK(v != NULL);
    /* A repeated key keeps its first position and the last value. */
    CHECK_STR(wr_json_write(a, v, NULL), "{\"b\":{},\"a\":\"x\\\"\xc3\xa9\xf0\x9f\x98\x80\\n\"}");
    CHECK(wr_json_parse(a, "{\"a\":}", 6, &error) == NULL && error != NULL);
    CHECK(wr_json_parse(a, "[1,]", 4, NULL) == NULL);
    CHECK(wr_json_parse(a, "01", 2, NULL) == NULL);
    CHECK(wr_json_parse(a, "\"\\ud800\"", 8, NULL) == NULL);
    CHECK(wr_json_parse(a, "1 2", 3, NULL) == NULL);
    int64_t n = 0;
    CHECK(wr_json_i64(parse(a, "-9223372036854775808"), &n) && n == INT64_MIN);
    CHECK(!wr_json_i64(parse(a, "9223372036854775808"), &n));
    CHECK(!wr_json_i64(parse(a, "2.0"), &n));
    CHECK(!wr_json_i64(parse(a, "1e2"), &n));
    CHECK(wr_json_i64(parse(a, "42"), &n) && n == 42);
    CHECK_STR(wr_json_write(a, wr_json_stringn(a, "a\0b\x01", 4), NULL), "\"a\\u0000b\\u0001\"");
}

static void test_format(wr_arena *a) {
    current = "format";
    CHECK_STR(wr_sprintf(a, "%s|%.*s|%c|%d|%lld|%zu|%u|%x|%%", "ab", 2, "xyz", 'q', -12, (long long)INT64_MIN,
                         (size_t)7, 4000000000u, 255u),
              "ab|xy|q|-12|-9223372036854775808|7|4000000000|ff|%");
    CHECK_STR(wr_sprintf(a, "%" PRId64 "/%" PRId64, (int64_t)-3, (int64_t)9), "-3/9");
}

static void test_rust_helpers(wr_arena *a) {
    current = "rust helpers";
    CHECK(wr_is_blank(" \t\n\xe3\x80\x80", 6));
    CHECK(!wr_is_blank("\xef\xbb\xbf", 3)); /* U+FEFF is not White_Space */
    CHECK(!wr_is_blank("\x1c", 1));
    CHECK_STR(wr_debug_quote(a, "a/b\"\n\x1b", 6), "\"a/b\\\"\\n\\u{1b}\"");
}

/* Runs static-site on a parent spec (JSON text) with optional children and config. */
static bool run(wr_arena *a, const char *spec, const char *children, const char *config, wr_response *resp,
                wr_error *err) {
    char *parent = wr_sprintf(a,
                              "{\"apiVersion\":\"examples.wasm-reconciler.dev/v1alpha1\",\"kind\":\"StaticSite\","
                              "\"metadata\":{\"name\":\"web\",\"namespace\":\"demo\",\"generation\":1},\"spec\":%s}",
                              spec);
    wr_request req = {.arena = a, .parent = parse(a, parent), .children = parse(a, children ? children : "[]"),
                      .related = parse(a, "[]"), .config = config ? parse(a, config) : NULL, .now = "x"};
    wr_response_init(resp, a);
    memset(err, 0, sizeof *err);
    return static_site_reconcile(&req, resp, err);
}

static void test_static_site(wr_arena *a) {
    wr_response resp;
    wr_error err;
    current = "static-site children";
    CHECK(run(a, "{\"image\":\"nginx:1.27\",\"content\":{\"index.html\":\"hi\"}}", NULL, NULL, &resp, &err));
    CHECK(resp.children->count == 3);
    CHECK_STR(wr_kind_of(wr_json_at(resp.children, 0)), "ConfigMap");
    CHECK_STR(wr_name_of(wr_json_at(resp.children, 0)), "web-content");
    CHECK_STR(wr_name_of(wr_json_at(resp.children, 1)), "web");
    CHECK_STR(wr_kind_of(wr_json_at(resp.children, 2)), "Service");
    CHECK_STR(wr_json_str(wr_json_get(resp.status, "url")), "http://web.demo.svc.cluster.local/");
    CHECK_STR(wr_json_str(wr_json_get(resp.status, "contentHash")),
              "91060b282a73cb28480f87cd3654ce9941bfee159fc0068c853984453bfc1939");
    CHECK(resp.n_conditions == 1 && resp.conditions[0].status == WR_UNKNOWN);

    current = "static-site availability";
    const char *dep = "[{\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\"},\"status\":{\"availableReplicas\":1}}]";
    CHECK(run(a, "{\"image\":\"x\",\"replicas\":2}", dep, NULL, &resp, &err));
    CHECK(resp.conditions[0].status == WR_FALSE);
    CHECK_STR(resp.conditions[0].message, "1/2 replicas available");

    current = "static-site content change";
    const char *old = "[{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"web-content\",\"annotations\":"
                      "{\"" CONTENT_HASH_ANNOTATION "\":\"old\"}}}]";
    CHECK(run(a, "{\"image\":\"x\"}", old, NULL, &resp, &err));
    CHECK(resp.n_events == 1 && strcmp(resp.events[0].reason, "ContentChanged") == 0);

    current = "static-site invalid specs";
    struct { const char *spec, *message; } cases[] = {
        {"{}", "spec.image: required"},
        {"{\"image\":\" \"}", "spec.image: required"},
        {"{\"image\":3}", "spec.image: must be a string"},
        {"{\"image\":\"x\",\"replicas\":-1}", "spec.replicas: must be >= 0, got -1"},
        {"{\"image\":\"x\",\"replicas\":\"two\"}", "spec.replicas: must be an integer"},
        {"{\"image\":\"x\",\"replicas\":2.0}", "spec.replicas: must be an integer"},
        {"{\"image\":\"x\",\"port\":0}", "spec.port: must be between 1 and 65535, got 0"},
        {"{\"image\":\"x\",\"content\":{\"a/b\":\"\"}}",
         "spec.content[\"a/b\"]: file name must be 1-253 characters of letters, digits, '-', '_' or '.'"},
        {"{\"image\":\"x\",\"content\":{\"a.html\":1}}", "spec.content[\"a.html\"]: must be a string"},
        {"{\"image\":\"x\",\"content\":[]}", "spec.content: must be a map of file name to contents"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(!run(a, cases[i].spec, NULL, NULL, &resp, &err) && err.kind == WR_PERMANENT);
        CHECK_STR(err.reason, "InvalidSpec");
        CHECK_STR(err.message, cases[i].message);
    }

    current = "static-site config";
    CHECK(run(a, "{\"image\":\"x\",\"port\":8080}", NULL, "{\"clusterDomain\":\"example.internal\"}", &resp, &err));
    CHECK_STR(wr_json_str(wr_json_get(resp.status, "url")), "http://web.demo.svc.example.internal:8080/");
    CHECK(!run(a, "{\"image\":\"x\"}", NULL, "{\"nope\":1}", &resp, &err));
    CHECK_STR(err.message, "config: unknown field `nope`, expected `clusterDomain`");
    CHECK(!run(a, "{\"image\":\"x\"}", NULL, "{\"clusterDomain\":5}", &resp, &err));
    CHECK_STR(err.message, "config: invalid type: integer `5`, expected a string");
}

int main(void) {
    wr_arena *a = wr_arena_new();
    test_sha256(a);
    test_names(a);
    test_json(a);
    test_format(a);
    test_rust_helpers(a);
    test_static_site(a);
    wr_arena_free(a);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
