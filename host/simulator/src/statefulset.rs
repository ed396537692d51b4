//! stub

pub async fn sync(_cx: &mut crate::pass::Cx<'_>) {}
