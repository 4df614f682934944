//! Property: no byte sequence makes the decoder panic or allocate beyond the frame limit.

use proptest::prelude::*;
use xsched_proto::{ClientMsg, read_frame};

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let mut r = bytes.as_slice();
        for _ in 0..8 {
            match read_frame::<ClientMsg>(&mut r) {
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
    }
}
