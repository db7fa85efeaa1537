//! Replays the fuzz targets' seeds (`fuzz/seeds/<target>/`) and a bounded number of
//! deterministic mutations of them, so `cargo test` runs the fuzz entry points without a
//! nightly toolchain. A panic here is a bug the fuzzer would have found.

use std::path::Path;

/// xorshift64*: reproducible mutations without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const INTERESTING: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b"\\",
    b":",
    b",",
    b"\n",
    b"\r",
    b"\n\n",
    b"\0",
    b"data:",
    b"id:",
    b"null",
    b"-32602",
    b"\"error\"",
    b"\"result\"",
    b"\xff",
    b"\xe2\x82",
];

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut d = seeds[rng.below(seeds.len())].clone();
    for _ in 0..=rng.below(4) {
        match rng.below(5) {
            0 if !d.is_empty() => {
                let i = rng.below(d.len());
                d[i] ^= 1 << rng.below(8);
            }
            1 if !d.is_empty() => {
                let i = rng.below(d.len());
                let n = rng.below(8).min(d.len() - i);
                d.drain(i..i + n);
            }
            2 => {
                let i = rng.below(d.len() + 1);
                let piece = INTERESTING[rng.below(INTERESTING.len())];
                d.splice(i..i, piece.iter().copied());
            }
            3 => {
                let other = &seeds[rng.below(seeds.len())];
                let (i, j) = (rng.below(d.len() + 1), rng.below(other.len() + 1));
                d.truncate(i);
                d.extend_from_slice(&other[j..]);
            }
            _ => {
                let i = rng.below(d.len() + 1);
                d.truncate(i);
            }
        }
    }
    d
}

fn replay(target: &str, f: fn(&[u8]), mutations: usize) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target);
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
    seeds.sort();
    // Also whatever a local fuzzing run found, when there is one.
    if let Ok(found) = std::fs::read_dir(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/corpus")
            .join(target),
    ) {
        seeds.extend(found.filter_map(|e| std::fs::read(e.ok()?.path()).ok()));
    }
    for s in &seeds {
        f(s);
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ target.len() as u64);
    for _ in 0..mutations {
        let input = mutate(&mut rng, &seeds);
        f(&input);
    }
}

#[test]
fn envelope_parser_survives_its_corpus() {
    replay("envelope", toolgate::fuzzing::envelope, 20_000);
}

#[test]
fn sse_splitter_gives_back_what_it_gets_under_any_chunking() {
    replay("sse", toolgate::fuzzing::sse, 20_000);
}

#[test]
fn validation_and_report_survive_their_corpus() {
    replay("validate", toolgate::fuzzing::validate, 1_500);
}

#[test]
fn rewriter_survives_its_corpus() {
    replay("canon", toolgate::fuzzing::canon, 5_000);
}

#[test]
fn the_engine_answers_every_input_readably() {
    replay("engine", toolgate::fuzzing::engine, 2_000);
}
