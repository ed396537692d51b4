//! A minimal protobuf writer for the Kubernetes envelope (`k8s\0` +
//! runtime.Unknown) and the few built-in messages kubectl's generators send
//! as protobuf. Hand-written because it is ~60 lines against a generated
//! binding of all of k8s.io/api; field numbers are those of the
//! `generated.proto` files of k8s.io/api v0.37.2.

/// A message under construction.
#[derive(Default, Clone)]
pub struct Msg(Vec<u8>);

fn varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

impl Msg {
    pub fn new() -> Self {
        Msg::default()
    }
    pub fn bytes(mut self, field: u64, b: &[u8]) -> Self {
        varint(&mut self.0, field << 3 | 2);
        varint(&mut self.0, b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    pub fn str(self, field: u64, s: &str) -> Self {
        self.bytes(field, s.as_bytes())
    }
    pub fn msg(self, field: u64, m: Msg) -> Self {
        self.bytes(field, &m.0)
    }
    pub fn int(mut self, field: u64, v: u64) -> Self {
        varint(&mut self.0, field << 3);
        varint(&mut self.0, v);
        self
    }
    /// A `map<string,string>` entry.
    pub fn entry(self, field: u64, k: &str, v: &str) -> Self {
        self.msg(field, Msg::new().str(1, k).str(2, v))
    }
    #[cfg(test)]
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

/// ObjectMeta with a name and labels.
pub fn meta(name: &str, labels: &[(&str, &str)]) -> Msg {
    labels
        .iter()
        .fold(Msg::new().str(1, name), |m, (k, v)| m.entry(11, k, v))
}

/// The `k8s\0` envelope around `raw`.
pub fn envelope(api_version: &str, kind: &str, raw: Msg) -> Vec<u8> {
    let unknown = Msg::new()
        .msg(1, Msg::new().str(1, api_version).str(2, kind))
        .bytes(2, &raw.0);
    let mut out = b"k8s\0".to_vec();
    out.extend(unknown.0);
    out
}

/// The typeMeta (apiVersion, kind) of an envelope, if `b` is one.
pub fn envelope_type(b: &[u8]) -> Option<(String, String)> {
    let rest = b.strip_prefix(b"k8s\0")?;
    let tm = field(rest, 1)?;
    let s = |n| field(tm, n).map(|x| String::from_utf8_lossy(x).into_owned());
    Some((s(1).unwrap_or_default(), s(2).unwrap_or_default()))
}

/// The first length-delimited field `n` of a message.
fn field(mut b: &[u8], n: u64) -> Option<&[u8]> {
    let read = |b: &mut &[u8]| -> Option<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let (&x, rest) = b.split_first()?;
            *b = rest;
            v |= u64::from(x & 0x7f) << (7 * i);
            if x & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    };
    while !b.is_empty() {
        let key = read(&mut b)?;
        match key & 7 {
            0 => {
                read(&mut b)?;
            }
            2 => {
                let len = usize::try_from(read(&mut b)?).ok()?;
                let (x, rest) = b.split_at_checked(len)?;
                b = rest;
                if key >> 3 == n {
                    return Some(x);
                }
            }
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn envelope_round_trip() {
        let b = super::envelope("v1", "ConfigMap", super::meta("a", &[]));
        assert_eq!(&b[..4], b"k8s\0");
        assert_eq!(
            super::envelope_type(&b),
            Some(("v1".to_string(), "ConfigMap".to_string()))
        );
    }

    #[test]
    fn varints_are_little_endian_base_128() {
        let m = super::Msg::new().int(1, 300).into_bytes();
        assert_eq!(m, vec![0x08, 0xac, 0x02]);
    }
}
