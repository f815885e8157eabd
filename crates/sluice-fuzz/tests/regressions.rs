//! Every fuzz target on stable Rust: the inputs kept under `fuzz/regressions/<target>/` (crash
//! inputs found earlier, which must never crash again) and `fuzz/seeds/<target>/` (the seed
//! corpus), then bounded random mutations of those inputs.
//!
//! The coverage-guided runs are `fuzz/`'s (cargo-fuzz, libFuzzer); this is the check every
//! `cargo test` makes. Each input runs on a thread with the stack a Tokio worker of the
//! server has (2 MiB), so that an input recursing too deep fails here as it would abort the
//! server. The mutation seed is printed; `SLUICE_FUZZ_SEED=N` replays a run.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Tokio's default worker stack, which the server's handlers run on.
const WORKER_STACK_BYTES: usize = 2 * 1024 * 1024;

/// How long the random part may run per target, and the most inputs it tries.
const MUTATION_TIME_MAX: Duration = Duration::from_secs(3);
const MUTATION_INPUTS_MAX: usize = 20_000;

/// Longest mutated input, in bytes (libFuzzer's default `-max_len` is 4096).
const MUTATION_LEN_MAX: usize = 8_192;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The files directly under `dir`, in name order; none if it does not exist.
fn inputs(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> =
        entries.map(|e| e.expect("a directory entry").path()).filter(|p| p.is_file()).collect();
    files.sort();
    files.into_iter().map(|p| (p.clone(), std::fs::read(&p).expect("a readable input"))).collect()
}

/// Runs `inputs` through `target` on a worker-sized stack, naming the input that fails. An
/// input that overflows the stack aborts the test process instead; the thread's name, which
/// the abort message carries, then says which input it was.
fn run_all(name: &str, thread: &str, target: fn(&[u8]), inputs: Vec<(String, Vec<u8>)>) {
    let count = inputs.len();
    let target_name = name.to_string();
    std::thread::Builder::new()
        .name(thread.to_string())
        .stack_size(WORKER_STACK_BYTES)
        .spawn(move || {
            for (label, data) in &inputs {
                let outcome = std::panic::catch_unwind(|| target(data));
                assert!(outcome.is_ok(), "{target_name}: input {label} panicked ({} bytes)", data.len());
            }
        })
        .expect("spawn a fuzz thread")
        .join()
        .unwrap_or_else(|_| panic!("{name}: a thread running {count} inputs died"));
}

fn kept(name: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let mut all = inputs(&fuzz_dir().join("regressions").join(name));
    all.extend(inputs(&fuzz_dir().join("seeds").join(name)));
    all
}

#[test]
fn kept_inputs_never_crash() {
    let mut replayed = 0;
    for &(name, target) in sluice_fuzz::TARGETS {
        let files = kept(name);
        assert!(!files.is_empty(), "{name} has seed inputs under fuzz/seeds/{name}");
        replayed += files.len();
        for (path, data) in files {
            let label = path.strip_prefix(fuzz_dir()).unwrap_or(&path).display().to_string();
            run_all(name, &label, target, vec![(label.clone(), data)]);
        }
    }
    println!("replayed {replayed} kept inputs");
}

/// One random edit: flip a byte, insert or delete a run, duplicate a slice, or splice in a
/// slice of another input.
fn mutate(rng: &mut StdRng, input: &mut Vec<u8>, other: &[u8]) {
    let at = |rng: &mut StdRng, len: usize| if len == 0 { 0 } else { rng.gen_range(0..=len) };
    match rng.gen_range(0..6) {
        0 if !input.is_empty() => {
            let i = rng.gen_range(0..input.len());
            input[i] = rng.r#gen();
        }
        1 => {
            let i = at(rng, input.len());
            let byte = *[b'[', b'{', b'"', b'.', b'&', b'=', b'%', 0xff, b'\\', b'1']
                .get(rng.gen_range(0..10))
                .unwrap_or(&b'x');
            let run = rng.gen_range(1..64);
            input.splice(i..i, std::iter::repeat_n(byte, run));
        }
        2 if !input.is_empty() => {
            let i = rng.gen_range(0..input.len());
            let j = (i + rng.gen_range(1..32)).min(input.len());
            input.drain(i..j);
        }
        3 if !input.is_empty() => {
            let i = rng.gen_range(0..input.len());
            let j = (i + rng.gen_range(1..64)).min(input.len());
            let slice = input[i..j].to_vec();
            let k = at(rng, input.len());
            input.splice(k..k, slice);
        }
        _ if !other.is_empty() => {
            let i = rng.gen_range(0..other.len());
            let j = (i + rng.gen_range(1..128)).min(other.len());
            let k = at(rng, input.len());
            input.splice(k..k, other[i..j].iter().copied());
        }
        _ => input.push(rng.r#gen()),
    }
    input.truncate(MUTATION_LEN_MAX);
}

#[test]
fn random_mutations_of_kept_inputs_never_crash() {
    let seed = std::env::var("SLUICE_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random::<u64>);
    println!("mutation seed {seed} (SLUICE_FUZZ_SEED={seed} replays this run)");
    for &(name, target) in sluice_fuzz::TARGETS {
        let corpus: Vec<Vec<u8>> = kept(name).into_iter().map(|(_, d)| d).collect();
        let mut rng = StdRng::seed_from_u64(seed ^ name.len() as u64);
        let started = Instant::now();
        let mut batch = Vec::new();
        let mut tried = 0;
        while tried < MUTATION_INPUTS_MAX && started.elapsed() < MUTATION_TIME_MAX {
            let mut input = corpus[rng.gen_range(0..corpus.len())].clone();
            let other = &corpus[rng.gen_range(0..corpus.len())];
            for _ in 0..rng.gen_range(1..8) {
                mutate(&mut rng, &mut input, other);
            }
            batch.push((format!("#{tried} of seed {seed}"), input));
            tried += 1;
            if batch.len() == 500 {
                run_all(name, &format!("{name}, seed {seed}"), target, std::mem::take(&mut batch));
            }
        }
        run_all(name, &format!("{name}, seed {seed}"), target, batch);
        println!("{name}: {tried} mutated inputs");
    }
}
