//! What the sources' URLs share: percent-decoding of their parts, and the redaction of a
//! URL's credentials for logs and errors (`nats://`, `amqp://`).

/// Percent-decodes `s` (`%40` for `@`, …); the error says what is wrong (its caller names the
/// field).
pub fn decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| "has a '%' not followed by two hex digits".to_owned())?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "is not UTF-8 once percent-decoded".to_owned())
}

/// `url` with its user-info's password replaced by `***`: everything between `://` and the
/// last `@` is taken as user-info (so a password holding a raw `@`, `/` or `?` is still
/// hidden), and user-info without a `:` is hidden whole (it may be a token).
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.rsplit_once('@') {
        Some((user_info, tail)) => match user_info.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{tail}"),
            None => format!("{scheme}://***@{tail}"),
        },
        None => url.to_owned(),
    }
}
