//! The gateway as a trusted proxy of nats-server (2.12+, `proxies { trusted: [...] }`): each
//! client's CONNECT carries `proxy_sig`, the nonce of the server's INFO signed with the gateway's
//! nkey, so users marked `proxy_required` can connect only through the gateway.
//!
//! An nkey seed is base32 (RFC 4648, no padding) of: two prefix bytes (seed, then key type),
//! the 32-byte Ed25519 seed, and a CRC-16/XMODEM of the rest, little-endian.

use ed25519_compact::{KeyPair, Seed};

use crate::jwt::base64url_encode;

const BASE32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
/// nkeys' prefix bytes: 'S' (seed), 'U' (user), 'A' (account), 'O' (operator), 'N' (server).
const PREFIX_SEED: u8 = 18 << 3;
const KEY_TYPES: [(u8, char); 4] = [(20 << 3, 'U'), (0, 'A'), (14 << 3, 'O'), (13 << 3, 'N')];

/// The gateway's signing key. Its Debug never shows the seed.
pub struct ProxyKey {
    pair: KeyPair,
    public: String,
}

impl std::fmt::Debug for ProxyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProxyKey({})", self.public)
    }
}

impl ProxyKey {
    /// Reads an nkey seed ("SU…"); the error never repeats the seed.
    pub fn from_seed(seed: &str) -> Result<ProxyKey, &'static str> {
        let raw = base32_decode(seed.trim().as_bytes()).ok_or("not base32")?;
        let [b0, b1, rest @ ..] = raw.as_slice() else {
            return Err("too short");
        };
        let (body, crc) = raw.split_at(raw.len().saturating_sub(2));
        if rest.len() != 34 || crc != crc16(body).to_le_bytes() {
            return Err("not an nkey seed (length or checksum)");
        }
        if b0 & 0xf8 != PREFIX_SEED {
            return Err("not a seed (it must start with S)");
        }
        let key_type = ((b0 & 0x07) << 5) | (b1 >> 3);
        let letter = KEY_TYPES
            .iter()
            .find(|(t, _)| *t == key_type)
            .map(|(_, l)| *l)
            .ok_or("unknown key type")?;
        let seed = Seed::from_slice(&rest[..32]).map_err(|_| "bad seed")?;
        let pair = KeyPair::from_seed(seed);
        let mut public = vec![key_type];
        public.extend_from_slice(pair.pk.as_ref());
        public.extend_from_slice(&crc16(&public).to_le_bytes());
        let public = base32_encode(&public);
        debug_assert!(public.starts_with(letter));
        Ok(ProxyKey { pair, public })
    }

    /// The public key nats-server's `proxies.trusted` names.
    pub fn public_key(&self) -> &str {
        &self.public
    }

    /// `proxy_sig` for a connection whose INFO carried `nonce`.
    pub fn sign(&self, nonce: &[u8]) -> String {
        base64url_encode(self.pair.sk.sign(nonce, None).as_ref())
    }
}

fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &b| {
        (0..8).fold(crc ^ (u16::from(b) << 8), |c, _| {
            if c & 0x8000 != 0 {
                (c << 1) ^ 0x1021
            } else {
                c << 1
            }
        })
    })
}

fn base32_decode(text: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 5 / 8);
    let (mut acc, mut bits) = (0u64, 0);
    for &c in text {
        let v = BASE32.iter().position(|&a| a == c)? as u64;
        acc = (acc << 5) | v;
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

fn base32_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(5) * 8);
    let (mut acc, mut bits) = (0u64, 0);
    for &b in bytes {
        acc = (acc << 8) | u64::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(BASE32[(acc >> bits) as usize & 31]));
        }
    }
    if bits > 0 {
        out.push(char::from(BASE32[(acc << (5 - bits)) as usize & 31]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // Generated with github.com/nats-io/nkeys v0.4 (CreateUser): seed and its public key.
    const SEED: &str = "SUAKSIF6SLPX5WIAPHTT27YF6ORDFDGXGX4DMDOH6CNR3Z42YPN6W3MIGE";
    const PUBLIC: &str = "UDP5EF5IB76KKAMWNC5LUQIQSHRFPGYIKAHQVZ6WFOGKY4P44WHFPG7I";
    const NONCE: &str = "kYWqOPOjXZp4eGI";
    const SIG: &str = "OS_G6QhbwnZY3yb2t33cd9DJ1G1PfWYrP7N2sj17mdhL8pdZsUOyaO2EP3VzjKoyCm36P6h05PZTUwgID-x8BA";

    #[test]
    fn reads_a_seed_as_nkeys_writes_it() {
        let key = ProxyKey::from_seed(SEED).expect("seed");
        assert_eq!(key.public_key(), PUBLIC);
        assert!(
            !format!("{key:?}").contains(&SEED[2..10]),
            "Debug must not show the seed"
        );
    }

    #[test]
    fn signs_the_nonce_as_nkeys_does() {
        // Ed25519 is deterministic: nkeys' signature of the same nonce is the same bytes.
        assert_eq!(ProxyKey::from_seed(SEED).unwrap().sign(NONCE.as_bytes()), SIG);
    }

    #[test]
    fn refuses_what_is_not_a_seed() {
        let cases = [
            ("", "too short"),
            ("not base32!", "not base32"),
            (PUBLIC, "not an nkey seed (length or checksum)"),
        ];
        for (text, want) in cases {
            assert_eq!(ProxyKey::from_seed(text).unwrap_err(), want, "{text}");
        }
        let mut flipped = SEED.to_owned();
        flipped.replace_range(10..11, if &SEED[10..11] == "A" { "B" } else { "A" });
        assert!(
            ProxyKey::from_seed(&flipped).is_err(),
            "a changed seed fails its checksum"
        );
    }
}
