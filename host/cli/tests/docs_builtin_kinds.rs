//! The list of built-in kinds in `docs/authoring.md` is generated from the
//! embedded API server's catalog (`host/apiserver/src/catalog.rs`), never
//! typed: this test fails when the two differ, and rewrites the section with
//! `WR_UPDATE_DOCS=1 cargo test -p wasm-reconciler --test cli -- docs_builtin_kinds::`.

use wr_tests::plugins::workspace_root;

const BEGIN: &str = "<!-- builtin-kinds:begin (generated: WR_UPDATE_DOCS=1 cargo test -p wasm-reconciler --test cli -- docs_builtin_kinds::) -->\n";
const END: &str = "<!-- builtin-kinds:end -->";

fn table() -> String {
    let mut kinds = wr_apiserver::builtin_kinds();
    kinds.sort_by(|a, b| (&a.group, &a.kind).cmp(&(&b.group, &b.kind)));
    let mut out =
        String::from("| apiVersion | kind | resource | scope |\n| --- | --- | --- | --- |\n");
    for k in kinds {
        let versions: Vec<String> = k
            .versions
            .iter()
            .map(|v| {
                if k.group.is_empty() {
                    v.clone()
                } else {
                    format!("{}/{v}", k.group)
                }
            })
            .collect();
        out.push_str(&format!(
            "| `{}` | {} | `{}` | {} |\n",
            versions.join("`, `"),
            k.kind,
            k.resource,
            if k.namespaced {
                "Namespaced"
            } else {
                "Cluster"
            }
        ));
    }
    out
}

#[test]
fn authoring_doc_lists_the_catalogs_builtin_kinds() {
    let path = workspace_root().join("docs/authoring.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let start = doc.find(BEGIN).expect("the builtin-kinds:begin marker") + BEGIN.len();
    let end = doc[start..]
        .find(END)
        .expect("the builtin-kinds:end marker")
        + start;
    let want = table();
    if doc[start..end] == want {
        return;
    }
    if std::env::var("WR_UPDATE_DOCS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, format!("{}{want}{}", &doc[..start], &doc[end..])).unwrap();
        return;
    }
    panic!(
        "docs/authoring.md lists other built-in kinds than the catalog; run \
         WR_UPDATE_DOCS=1 cargo test -p wasm-reconciler --test cli -- docs_builtin_kinds::"
    );
}
