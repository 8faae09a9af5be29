//! One stable content hash for the documents the server versions by content (OpenAPI `?hash=`
//! keys, discovery ETags): not a security hash, only a change detector.

/// FNV-1a, 64 bits.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
