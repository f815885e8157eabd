//! Which partition an appended record goes to: an explicit partition, Kafka's default
//! partitioner for a key, or round robin.
//!
//! Kafka's default partitioner is `toPositive(murmur2(keyBytes)) % numPartitions`, with
//! `murmur2` the 32-bit MurmurHash2 of the key bytes (4-byte words read little-endian) seeded
//! with `0x9747b28c`, and `toPositive` the mask `& 0x7fffffff` (not an absolute value). A key
//! therefore lands on the partition a Kafka producer would choose, for the same partition count.
//!
//! Why it is written here rather than taken from a crate: the one pure-Rust murmur2 crate
//! (`murmur2` 0.1.0) has had a single release and no maintenance since, and the function is a
//! dozen lines whose every output is fixed by Kafka's own test vectors (`UtilsTest.testMurmur2`,
//! in the tests below). The tests also check it against that crate on random keys.

/// Kafka's `Utils.murmur2`: MurmurHash2 of `data` with Kafka's seed.
pub fn murmur2(data: &[u8]) -> u32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h = SEED ^ data.len() as u32;
    let mut words = data.chunks_exact(4);
    for word in &mut words {
        let mut k = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u32::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^ (h >> 15)
}

/// The partition Kafka's default partitioner gives `key` among `partitions` (at least 1).
pub fn partition_for_key(key: &[u8], partitions: u32) -> u32 {
    (murmur2(key) & 0x7fff_ffff) % partitions.max(1)
}

/// How one record chooses its partition, in order of precedence: an explicit partition, then
/// its key, then the stream's round-robin counter (`next_round_robin`, advanced by the caller).
pub fn choose(explicit: Option<u32>, key: Option<&[u8]>, partitions: u32, next_round_robin: &mut u64) -> u32 {
    if let Some(p) = explicit {
        return p;
    }
    match key {
        Some(key) => partition_for_key(key, partitions),
        None => {
            let p = (*next_round_robin % u64::from(partitions.max(1))) as u32;
            *next_round_robin = next_round_robin.wrapping_add(1);
            p
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Kafka's `UtilsTest.testMurmur2`, as the Java `int`s it asserts.
    #[test]
    fn matches_kafka_test_vectors() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58_897_971),
            (b"abc", 479_470_107),
        ];
        for (key, expected) in cases {
            assert_eq!(murmur2(key) as i32, expected, "{:?}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn keys_land_where_kafka_puts_them_and_round_robin_cycles() {
        // toPositive(-790332482) = 1357151166; % 7 = 1357151166 - 7 * 193878738 = 0.
        assert_eq!(partition_for_key(b"foobar", 7), 1_357_151_166 % 7);
        assert_eq!(partition_for_key(b"abc", 1), 0);
        let mut rr = 0;
        let picks: Vec<u32> = (0..5).map(|_| choose(None, None, 3, &mut rr)).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1]);
        assert_eq!(choose(Some(2), Some(b"abc"), 3, &mut rr), 2, "an explicit partition wins");
        assert_eq!(rr, 5, "keyed and explicit records do not advance round robin");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]
        #[test]
        fn agrees_with_the_murmur2_crate(key in proptest::collection::vec(any::<u8>(), 0..64)) {
            prop_assert_eq!(murmur2(&key), ::murmur2::murmur2(&key, 0x9747_b28c));
        }
    }
}
