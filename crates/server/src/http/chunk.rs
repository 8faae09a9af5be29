//! [`Chunk`]: response bytes in several shared pieces, handed to the transport as one body
//! frame (the body type a connection hands hyper, [`crate::http::conn_body::ConnBody`], has
//! `Chunk` data).
//!
//! ## Guarantees
//! - A chunk's bytes are its pieces' bytes in order; nothing is copied to build it (the
//!   pieces are `Bytes`: a watch event's cached encoding is shared by every watcher, its
//!   framing text is static), and a chunk of up to [`INLINE`] pieces allocates nothing.
//! - One chunk is one body frame: over HTTP/1.1 one chunked-encoding header and one entry
//!   in hyper's write queue for a whole batch of watch events (its pieces become the
//!   `writev`'s slices), over HTTP/2 one DATA frame (split only by the flow-control window).

use bytes::{Buf, BufMut as _, Bytes};

/// Pieces a chunk holds without allocating (a shared watch event: prefix, object, suffix).
pub const INLINE: usize = 3;

/// Body bytes in pieces, sent as one frame (see the module docs).
#[derive(Debug, Default)]
pub struct Chunk {
    /// The pieces when there are at most [`INLINE`] of them (`heap` is then empty).
    inline: [Bytes; INLINE],
    /// The pieces when there are more.
    heap: Vec<Bytes>,
    /// Pieces in `inline`.
    len: usize,
    /// The first piece not yet consumed.
    next: usize,
    /// Bytes not yet consumed.
    remaining: usize,
}

impl Chunk {
    /// A chunk of `parts`' pieces, leaving `parts` empty. Up to [`INLINE`] pieces are moved
    /// into the chunk and `parts` keeps its capacity for the next batch; more pieces take
    /// `parts`' vector along (and leave an empty one of the same capacity in its place).
    #[must_use]
    pub fn from_parts(parts: &mut Vec<Bytes>) -> Chunk {
        let remaining = parts.iter().map(Bytes::len).sum();
        if parts.len() <= INLINE {
            let mut chunk = Chunk {
                len: parts.len(),
                remaining,
                ..Chunk::default()
            };
            for (slot, part) in chunk.inline.iter_mut().zip(parts.drain(..)) {
                *slot = part;
            }
            return chunk;
        }
        let capacity = parts.capacity();
        Chunk {
            heap: std::mem::replace(parts, Vec::with_capacity(capacity)),
            remaining,
            ..Chunk::default()
        }
    }

    fn parts(&self) -> &[Bytes] {
        if self.heap.is_empty() {
            &self.inline[..self.len]
        } else {
            &self.heap
        }
    }

    fn parts_mut(&mut self) -> &mut [Bytes] {
        if self.heap.is_empty() {
            &mut self.inline[..self.len]
        } else {
            &mut self.heap
        }
    }
}

impl From<Bytes> for Chunk {
    fn from(bytes: Bytes) -> Chunk {
        let mut chunk = Chunk {
            len: 1,
            remaining: bytes.len(),
            ..Chunk::default()
        };
        chunk.inline[0] = bytes;
        chunk
    }
}

impl Buf for Chunk {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.parts()[self.next..]
            .iter()
            .find(|part| !part.is_empty())
            .map_or(&[], |part| part.as_ref())
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining, "advance past the end of a chunk");
        self.remaining -= cnt;
        let mut next = self.next;
        let parts = self.parts_mut();
        while cnt > 0 {
            let part = &mut parts[next];
            if cnt < part.len() {
                part.advance(cnt);
                break;
            }
            cnt -= part.len();
            // Consumed: release the piece now (a shared encoding's reference).
            *part = Bytes::new();
            next += 1;
        }
        self.next = next;
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [std::io::IoSlice<'a>]) -> usize {
        let mut filled = 0;
        for part in &self.parts()[self.next..] {
            if filled == dst.len() {
                break;
            }
            if !part.is_empty() {
                dst[filled] = std::io::IoSlice::new(part);
                filled += 1;
            }
        }
        filled
    }

    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        // The common case: the bytes asked for lie in the current piece (no copy).
        let next = self.next;
        if let Some(part) = self.parts_mut()[next..].iter_mut().find(|p| !p.is_empty())
            && part.len() >= len
        {
            let bytes = part.split_to(len);
            self.remaining -= len;
            return bytes;
        }
        let mut out = bytes::BytesMut::with_capacity(len);
        out.put((&mut *self).take(len));
        out.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(parts: &[&'static str]) -> Vec<Bytes> {
        parts
            .iter()
            .map(|p| Bytes::from_static(p.as_bytes()))
            .collect()
    }

    fn drain(mut chunk: Chunk, step: usize) -> Vec<u8> {
        let mut out = Vec::new();
        while chunk.has_remaining() {
            let n = chunk.chunk().len().min(step);
            assert!(n > 0, "a chunk with bytes remaining shows none");
            out.extend_from_slice(&chunk.chunk()[..n]);
            chunk.advance(n);
        }
        out
    }

    #[test]
    fn a_chunk_is_its_pieces_in_order_whatever_the_steps() {
        for parts in [
            pieces(&["abc"]),
            pieces(&["{\"a\":", "", "1}\n"]),
            pieces(&["a", "bc", "", "def", "g", "hij"]),
        ] {
            let whole: Vec<u8> = parts.iter().flat_map(|p| p.to_vec()).collect();
            for step in [1, 2, 5, 100] {
                let mut source = parts.clone();
                let chunk = Chunk::from_parts(&mut source);
                assert!(source.is_empty());
                assert_eq!(chunk.remaining(), whole.len());
                assert_eq!(drain(chunk, step), whole, "step {step}");
            }
        }
    }

    #[test]
    fn vectored_slices_skip_consumed_and_empty_pieces() {
        let mut source = pieces(&["ab", "", "cd", "ef", "gh"]);
        let mut chunk = Chunk::from_parts(&mut source);
        chunk.advance(3);
        let mut slices = [std::io::IoSlice::new(&[]); 8];
        let n = chunk.chunks_vectored(&mut slices);
        let seen: Vec<&[u8]> = slices[..n].iter().map(|s| &s[..]).collect();
        assert_eq!(seen, vec![&b"d"[..], b"ef", b"gh"]);
        let mut two = [std::io::IoSlice::new(&[]); 2];
        assert_eq!(chunk.chunks_vectored(&mut two), 2);
    }

    #[test]
    fn copy_to_bytes_crosses_pieces() {
        let mut source = pieces(&["ab", "cd", "ef", "gh"]);
        let mut chunk = Chunk::from_parts(&mut source);
        assert_eq!(&chunk.copy_to_bytes(1)[..], b"a");
        assert_eq!(&chunk.copy_to_bytes(1)[..], b"b");
        assert_eq!(&chunk.copy_to_bytes(3)[..], b"cde");
        assert_eq!(chunk.remaining(), 3);
        assert_eq!(drain(chunk, 10), b"fgh");
    }

    #[test]
    fn a_large_batch_leaves_its_source_empty_with_its_capacity() {
        let mut source = pieces(&["a", "b", "c", "d", "e"]);
        let capacity = source.capacity();
        let chunk = Chunk::from_parts(&mut source);
        assert!(source.is_empty());
        assert_eq!(source.capacity(), capacity);
        assert_eq!(drain(chunk, 1), b"abcde");
    }
}
