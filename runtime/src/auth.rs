//! Who may join a run: every rank holds the job's secret, and proves it without sending it.
//!
//! The secret reaches each rank through the environment (`DIC_JOB_SECRET`): `dic run
//! --local` generates one for its children, a cluster's launcher (or the Kubernetes Secret
//! the preflight Job references) gives every node the same. From it each rank derives a
//! 32-byte key (BLAKE3's key derivation, with this protocol's context string), and every
//! handshake is challenge-response: the side that accepts sends a fresh random nonce, the
//! side that connects answers with its message and a keyed BLAKE3 tag over the nonce and
//! the message; rank 0's reply carries a tag over the joining rank's own nonce. A stranger
//! without the secret cannot join, cannot replay an old handshake (the nonce is new) and
//! cannot pose as rank 0 to a joining rank. The plan digest (FNV of the file) is only a
//! consistency check, never a credential.

use std::fmt::Write as _;

/// The environment variable that carries the job's secret.
pub const SECRET_ENV: &str = "DIC_JOB_SECRET";
/// Random bytes in a nonce.
pub const NONCE: usize = 16;
/// Bytes in a tag.
pub const TAG: usize = 32;
/// Shortest secret accepted (characters).
const MIN_SECRET: usize = 16;

/// The key every rank of one job derives from the job's secret.
#[derive(Clone)]
pub struct JobKey([u8; 32]);

impl std::fmt::Debug for JobKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobKey(…)")
    }
}

impl JobKey {
    /// The key for `secret`; refused when it is too short to resist guessing.
    pub fn from_secret(secret: &str) -> Result<JobKey, String> {
        let secret = secret.trim();
        if secret.chars().count() < MIN_SECRET {
            return Err(format!(
                "{SECRET_ENV} must hold at least {MIN_SECRET} characters (e.g. `openssl rand -hex 32`)"
            ));
        }
        Ok(JobKey(blake3::derive_key(
            "dic run 2026 rendezvous and mesh handshake key",
            secret.as_bytes(),
        )))
    }

    /// A new random secret (64 hex digits) and its key.
    pub fn generate() -> Result<(String, JobKey), String> {
        let mut raw = [0u8; 32];
        getrandom::fill(&mut raw)
            .map_err(|e| format!("no random source for the job secret: {e}"))?;
        let mut hex = String::with_capacity(64);
        for b in raw {
            let _ = write!(hex, "{b:02x}");
        }
        let key = JobKey::from_secret(&hex)?;
        Ok((hex, key))
    }

    /// The tag of `parts` (each length-prefixed, so no two messages share a tag input).
    pub fn tag(&self, parts: &[&[u8]]) -> [u8; TAG] {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        for p in parts {
            h.update(&(p.len() as u64).to_le_bytes());
            h.update(p);
        }
        *h.finalize().as_bytes()
    }

    /// True when `tag` is the tag of `parts` (compared in constant time).
    pub fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        let Ok(tag): Result<[u8; TAG], _> = tag.try_into() else {
            return false;
        };
        // blake3::Hash compares in constant time.
        blake3::Hash::from_bytes(self.tag(parts)) == blake3::Hash::from_bytes(tag)
    }
}

/// A fresh random nonce.
pub fn nonce() -> Result<[u8; NONCE], String> {
    let mut n = [0u8; NONCE];
    getrandom::fill(&mut n).map_err(|e| format!("no random source for a nonce: {e}"))?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_bind_key_and_every_part() {
        let k = JobKey::from_secret("0123456789abcdef0123").unwrap();
        let other = JobKey::from_secret("0123456789abcdef0124").unwrap();
        let t = k.tag(&[b"hello", b"rank 1"]);
        assert!(k.verify(&[b"hello", b"rank 1"], &t));
        assert!(!other.verify(&[b"hello", b"rank 1"], &t));
        assert!(!k.verify(&[b"hello", b"rank 2"], &t));
        // length prefixes: moving a byte between parts changes the tag
        assert!(!k.verify(&[b"hellor", b"ank 1"], &t));
        assert!(!k.verify(&[b"hello", b"rank 1"], &t[..31]));
        assert!(JobKey::from_secret("short").is_err());
        let (s, g) = JobKey::generate().unwrap();
        assert_eq!(s.len(), 64);
        assert!(g.verify(&[b"x"], &JobKey::from_secret(&s).unwrap().tag(&[b"x"])));
        assert_ne!(nonce().unwrap(), nonce().unwrap());
    }
}
