//! [`Chunk`]: response bytes in several shared pieces, handed to the transport as one body
//! frame (the body type a connection hands hyper, [`crate::http::conn_body::ConnBody`], has
//! `Chunk` data).
//!
//! ## Guarantees
//! - A chunk's bytes are its pieces' bytes in order; nothing is copied to build it (the
//!   pieces are `Bytes`: a watch event's cached encoding is shared by every watcher, its
//!   framing text is static). A chunk of one piece (every response's frame, a watch
//!   batch of one MODIFIED event, whose frame is one shared buffer) allocates nothing. Up to
//!   [`FEW`] pieces (a lone ADDED or DELETED event of an object large enough to share its
//!   encoding: a static head, the shared piece, a static tail) are moved into a vector of
//!   their size, the batch's keeping its buffer; a batch of more takes the batch's vector
//!   along and leaves an empty one of its capacity. One allocation per chunk of several
//!   pieces, of at most the batch's size (up to three pieces were held inline before, at 144
//!   bytes a chunk: see below).
//! - One chunk is one body frame: over HTTP/1.1 one chunked-encoding header and one entry
//!   in hyper's write queue for a whole batch of watch events (its pieces become the
//!   `writev`'s slices), over HTTP/2 one DATA frame (split only by the flow-control window).
//! - A chunk is at most [`SIZE_MAX`] bytes (a test keeps it so): each delivery moves it
//!   several times on its way into hyper's write queue (out of the body, into a frame, into
//!   the chunked encoder's buffer, into the queue), and moves that small are a few register
//!   stores where a larger value's were each a `memcpy` call into the connection's cold
//!   queue (BENCHMARKS.md, invocation BZ: 144 bytes with three pieces inline, six such
//!   calls per delivery).

use bytes::{Buf, BufMut as _, Bytes};

/// The largest a [`Chunk`] may be, in bytes (see the module docs).
pub const SIZE_MAX: usize = 48;

/// Pieces moved into a vector of their own rather than taking the batch's (see the module
/// docs): an event's frame around a shared encoding has at most three.
pub const FEW: usize = 3;

/// Body bytes in pieces, sent as one frame (see the module docs).
#[derive(Debug)]
pub struct Chunk(Pieces);

#[derive(Debug)]
enum Pieces {
    /// One piece (every response's frame but a watch's batch of several), consumed in place.
    One(Bytes),
    /// Several: the batch's vector of pieces, consumed from `next`, `remaining` bytes left.
    Many {
        parts: Vec<Bytes>,
        next: usize,
        remaining: usize,
    },
}

impl Default for Chunk {
    fn default() -> Chunk {
        Chunk(Pieces::One(Bytes::new()))
    }
}

impl Chunk {
    /// A chunk of `parts`' pieces, leaving `parts` empty. One piece is moved into the chunk
    /// and up to [`FEW`] into a vector of their own, `parts` keeping its buffer for the next
    /// batch; more take `parts`' vector along (and leave an empty one of the same capacity in
    /// its place).
    #[must_use]
    pub fn from_parts(parts: &mut Vec<Bytes>) -> Chunk {
        if parts.len() <= 1 {
            return Chunk(Pieces::One(parts.pop().unwrap_or_default()));
        }
        let parts = if parts.len() <= FEW {
            let mut few = Vec::with_capacity(parts.len());
            few.append(parts);
            few
        } else {
            let capacity = parts.capacity();
            std::mem::replace(parts, Vec::with_capacity(capacity))
        };
        let remaining = parts.iter().map(Bytes::len).sum();
        Chunk(Pieces::Many {
            parts,
            next: 0,
            remaining,
        })
    }
}

impl From<Bytes> for Chunk {
    fn from(bytes: Bytes) -> Chunk {
        Chunk(Pieces::One(bytes))
    }
}

impl Buf for Chunk {
    fn remaining(&self) -> usize {
        match &self.0 {
            Pieces::One(piece) => piece.len(),
            Pieces::Many { remaining, .. } => *remaining,
        }
    }

    fn chunk(&self) -> &[u8] {
        match &self.0 {
            Pieces::One(piece) => piece,
            Pieces::Many { parts, next, .. } => parts[*next..]
                .iter()
                .find(|part| !part.is_empty())
                .map_or(&[], |part| part.as_ref()),
        }
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining(), "advance past the end of a chunk");
        match &mut self.0 {
            Pieces::One(piece) => {
                if cnt < piece.len() {
                    piece.advance(cnt);
                } else {
                    // Consumed: release the piece now (a shared encoding's reference).
                    *piece = Bytes::new();
                }
            }
            Pieces::Many {
                parts,
                next,
                remaining,
            } => {
                *remaining -= cnt;
                while cnt > 0 {
                    let part = &mut parts[*next];
                    if cnt < part.len() {
                        part.advance(cnt);
                        break;
                    }
                    cnt -= part.len();
                    *part = Bytes::new();
                    *next += 1;
                }
            }
        }
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [std::io::IoSlice<'a>]) -> usize {
        let parts = match &self.0 {
            Pieces::One(piece) => std::slice::from_ref(piece),
            Pieces::Many { parts, next, .. } => &parts[*next..],
        };
        let mut filled = 0;
        for part in parts {
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
        let current = match &mut self.0 {
            Pieces::One(piece) => Some(piece),
            Pieces::Many { parts, next, .. } => parts[*next..].iter_mut().find(|p| !p.is_empty()),
        };
        if let Some(part) = current
            && part.len() >= len
        {
            let bytes = part.split_to(len);
            if let Pieces::Many { remaining, .. } = &mut self.0 {
                *remaining -= len;
            }
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
            pieces(&["{\"a\":", "1}\n"]),
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
        let shared = Bytes::from_static(b"abcdef");
        let mut one = Chunk::from(shared.clone());
        let head = one.copy_to_bytes(2);
        assert_eq!((&head[..], head.as_ptr()), (&b"ab"[..], shared.as_ptr()));
        assert_eq!(one.remaining(), 4);
        assert_eq!(drain(one, 3), b"cdef");
    }

    /// Goal: a chunk stays small enough that moving it is not a `memcpy` call (see the
    /// module docs), one piece or several.
    #[test]
    fn a_chunk_is_small() {
        assert!(
            std::mem::size_of::<Chunk>() <= SIZE_MAX,
            "{} bytes",
            std::mem::size_of::<Chunk>()
        );
    }

    #[test]
    fn one_piece_is_released_once_consumed_and_copies_nothing() {
        let shared = Bytes::from(b"{\"type\":\"MODIFIED\"}\n".to_vec());
        let mut source = vec![shared.clone()];
        let capacity = source.capacity();
        let mut chunk = Chunk::from_parts(&mut source);
        assert!(source.is_empty());
        assert_eq!(source.capacity(), capacity, "the batch's vector stays");
        assert_eq!(
            chunk.chunk().as_ptr(),
            shared.as_ptr(),
            "shared, not copied"
        );
        let mut slices = [std::io::IoSlice::new(&[]); 4];
        assert_eq!(chunk.chunks_vectored(&mut slices), 1);
        assert!(!shared.is_unique());
        chunk.advance(shared.len());
        assert!(
            shared.is_unique(),
            "the consumed piece's reference is released"
        );
        assert_eq!(chunk.remaining(), 0);
        let mut slices = [std::io::IoSlice::new(&[]); 4];
        assert_eq!(chunk.chunks_vectored(&mut slices), 0);
        assert!(Chunk::from_parts(&mut Vec::new()).chunk().is_empty());
    }

    #[test]
    fn a_few_pieces_leave_the_batch_its_buffer() {
        let mut source = Vec::with_capacity(64);
        source.extend(pieces(&["{\"type\":\"ADDED\",\"object\":", "{}", "}\n"]));
        let buffer = source.as_ptr();
        let chunk = Chunk::from_parts(&mut source);
        assert!(source.is_empty());
        assert_eq!((source.as_ptr(), source.capacity()), (buffer, 64));
        assert_eq!(drain(chunk, 4), b"{\"type\":\"ADDED\",\"object\":{}}\n");
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
