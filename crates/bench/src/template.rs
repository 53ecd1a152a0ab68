//! Command templates: `TR.SETBIT foo-__RAND__ __RAND2__ 1` becomes a RESP request with fresh
//! random values each time. A placeholder counts only at the end of an argument, as in Tair's
//! tool; `__VALUE__` (a whole argument) becomes a value from the run's payload pool.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::options::Distribution;
use crate::payload::Payloads;

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Literal(Vec<u8>),
    /// A prefix followed by a `__RAND__` value.
    Rand(Vec<u8>),
    /// A prefix followed by a `__RAND2__` value.
    Rand2(Vec<u8>),
    Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    parts: Vec<Part>,
}

impl Template {
    pub fn parse(command: &str) -> Template {
        let parts = command
            .split_whitespace()
            .map(|word| {
                if word == "__VALUE__" {
                    Part::Value
                } else if let Some(prefix) = word.strip_suffix("__RAND2__") {
                    Part::Rand2(prefix.as_bytes().to_vec())
                } else if let Some(prefix) = word.strip_suffix("__RAND__") {
                    Part::Rand(prefix.as_bytes().to_vec())
                } else {
                    Part::Literal(word.as_bytes().to_vec())
                }
            })
            .collect();
        Template { parts }
    }

    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Appends one RESP-encoded request to `out`.
    pub fn render(&self, values: &mut ValueSource, out: &mut Vec<u8>) {
        out.extend_from_slice(format!("*{}\r\n", self.parts.len()).as_bytes());
        for part in &self.parts {
            let (prefix, number): (&[u8], Option<u64>) = match part {
                Part::Literal(text) => (text, None),
                Part::Rand(prefix) => (prefix, Some(values.rand())),
                Part::Rand2(prefix) => (prefix, Some(values.rand2())),
                Part::Value => {
                    let value = values.payloads.pick(&mut values.rng);
                    values.value_bytes += value.len() as u64;
                    bulk(out, value);
                    continue;
                }
            };
            let number = number.map(|n| n.to_string()).unwrap_or_default();
            out.extend_from_slice(format!("${}\r\n", prefix.len() + number.len()).as_bytes());
            out.extend_from_slice(prefix);
            out.extend_from_slice(number.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
}

fn bulk(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", data.len()).as_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Random values for one connection.
pub struct ValueSource {
    rng: SmallRng,
    distribution: Distribution,
    /// What the distribution draws from: `-r`, or the hot keys' count.
    range: u64,
    /// With hot keys, the range they are spread over and the stride that spreads them.
    scatter: Option<(u64, u64)>,
    range2: u64,
    sequence: Arc<AtomicU64>,
    zipf: Option<Zipf>,
    payloads: Arc<Payloads>,
    /// Bytes of `__VALUE__` rendered so far.
    pub value_bytes: u64,
}

impl ValueSource {
    /// With `hot`, `__RAND__` is one of that many numbers of `[0, range)`, spread evenly
    /// across it (see [`stride`]).
    pub fn new(
        seed: u64,
        distribution: Distribution,
        range: u64,
        hot: Option<u64>,
        range2: u64,
        payloads: Arc<Payloads>,
        sequence: Arc<AtomicU64>,
    ) -> Self {
        let rng = SmallRng::seed_from_u64(seed);
        let scatter = hot.map(|_| (range, stride(range)));
        let range = hot.map_or(range, |hot| hot.min(range));
        let zipf = match distribution {
            Distribution::Zipfian(s) => Some(Zipf::new(range, s)),
            _ => None,
        };
        ValueSource {
            rng,
            distribution,
            range,
            scatter,
            range2,
            sequence,
            zipf,
            payloads,
            value_bytes: 0,
        }
    }

    /// A `__RAND__` value in `[0, range)` drawn from the configured distribution.
    pub fn rand(&mut self) -> u64 {
        let drawn = self.draw();
        match self.scatter {
            Some((range, stride)) => {
                (u128::from(drawn) * u128::from(stride) % u128::from(range)) as u64
            }
            None => drawn,
        }
    }

    fn draw(&mut self) -> u64 {
        match self.distribution {
            Distribution::Uniform => self.rng.random_range(0..self.range),
            Distribution::Sequential => self.sequence.fetch_add(1, Ordering::Relaxed) % self.range,
            Distribution::Zipfian(_) => match &self.zipf {
                Some(zipf) => zipf.sample(&mut self.rng) - 1,
                None => 0,
            },
            Distribution::Gaussian => {
                // Box-Muller, centred in the range with a standard deviation of range/6.
                let (u1, u2): (f64, f64) =
                    (self.rng.random_range(f64::EPSILON..1.0), self.rng.random());
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                let x = self.range as f64 / 2.0 + z * self.range as f64 / 6.0;
                (x.max(0.0) as u64).min(self.range - 1)
            }
        }
    }

    /// A `__RAND2__` value, always uniform in `[0, range2)`.
    pub fn rand2(&mut self) -> u64 {
        self.rng.random_range(0..self.range2)
    }
}

/// A stride coprime with `range` near its golden section: `i * stride % range` for `i` in
/// `0..n` gives `n` distinct numbers spread evenly over the range (a Weyl sequence), as hot
/// keys lie among the others instead of in one run of neighbours.
fn stride(range: u64) -> u64 {
    let gcd = |mut a: u64, mut b: u64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let mut stride = ((range as f64 * 0.618_033_988_75) as u64).max(1);
    while gcd(stride, range) != 1 {
        stride += 1;
    }
    stride
}

/// Zipf over `1..=n` by rejection-inversion (Hörmann and Derflinger), O(1) memory for any n.
pub struct Zipf {
    n: f64,
    s: f64,
    h_x1: f64,
    h_n: f64,
    threshold: f64,
}

impl Zipf {
    pub fn new(n: u64, s: f64) -> Zipf {
        let n = n as f64;
        let mut zipf = Zipf {
            n,
            s,
            h_x1: 0.0,
            h_n: 0.0,
            threshold: 0.0,
        };
        zipf.h_x1 = zipf.h_integral(1.5) - 1.0;
        zipf.h_n = zipf.h_integral(n + 0.5);
        zipf.threshold = 2.0 - zipf.h_integral_inverse(zipf.h_integral(2.5) - zipf.h(2.0));
        zipf
    }

    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.s) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.s)).max(-1.0);
        (helper1(t) * x).exp()
    }

    pub fn sample(&self, rng: &mut impl Rng) -> u64 {
        loop {
            let u = self.h_n + rng.random::<f64>() * (self.h_x1 - self.h_n);
            let x = self.h_integral_inverse(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.threshold || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }
}

/// `ln(1 + x) / x`, accurate near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(exp(x) - 1) / x`, accurate near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::{PayloadKind, ValueSize};

    fn source(distribution: Distribution, range: u64, range2: u64) -> ValueSource {
        source_of_hot(distribution, range, None, range2)
    }

    fn source_of_hot(
        distribution: Distribution,
        range: u64,
        hot: Option<u64>,
        range2: u64,
    ) -> ValueSource {
        ValueSource::new(
            1,
            distribution,
            range,
            hot,
            range2,
            Arc::new(Payloads::new(
                PayloadKind::Letters,
                ValueSize {
                    min: 4,
                    max: 4,
                    mean: None,
                },
                1,
            )),
            Arc::new(AtomicU64::new(0)),
        )
    }

    fn render(template: &str, values: &mut ValueSource) -> String {
        let mut out = Vec::new();
        Template::parse(template).render(values, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn placeholders_expand_only_as_suffixes() {
        let mut values = source(Distribution::Sequential, 1000, 1);
        assert_eq!(
            render("TR.SETBIT foo-__RAND__ __RAND2__ 1 __RAND__x", &mut values),
            "*5\r\n$9\r\nTR.SETBIT\r\n$5\r\nfoo-0\r\n$1\r\n0\r\n$1\r\n1\r\n$9\r\n__RAND__x\r\n"
        );
        assert_eq!(
            render("GET k__RAND__", &mut values),
            "*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n"
        );
        let value = render("SET k __VALUE__", &mut values);
        assert!(
            value.starts_with("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\n"),
            "{value}"
        );
        assert_eq!(values.value_bytes, 4);
    }

    #[test]
    fn distributions_stay_in_range_and_have_their_shape() {
        for distribution in [
            Distribution::Uniform,
            Distribution::Zipfian(0.99),
            Distribution::Gaussian,
        ] {
            let mut values = source(distribution, 1000, 10);
            let draws: Vec<u64> = (0..20_000).map(|_| values.rand()).collect();
            assert!(draws.iter().all(|&v| v < 1000), "{distribution:?}");
            let low = draws.iter().filter(|&&v| v < 100).count();
            let middle = draws.iter().filter(|&&v| (450..550).contains(&v)).count();
            match distribution {
                Distribution::Uniform => assert!((1500..2500).contains(&low), "uniform low {low}"),
                Distribution::Zipfian(_) => {
                    assert!(low > 10_000, "zipf is skewed to low values: {low}")
                }
                Distribution::Gaussian => assert!(middle > 4 * low, "gaussian peaks in the middle"),
                Distribution::Sequential => {}
            }
        }
        let mut values = source(Distribution::Sequential, 3, 10);
        assert_eq!(
            (0..5).map(|_| values.rand()).collect::<Vec<_>>(),
            [0, 1, 2, 0, 1]
        );
    }

    #[test]
    fn hot_keys_are_distinct_and_spread_over_the_range() {
        let mut values = source_of_hot(Distribution::Sequential, 1_000_000, Some(1000), 1);
        let mut keys: Vec<u64> = (0..1000).map(|_| values.rand()).collect();
        assert_eq!(values.rand(), keys[0], "the same thousand again");
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), 1000);
        assert!(keys.iter().all(|&k| k < 1_000_000));
        // Evenly spread: no gap between neighbours is more than a few times the mean.
        let widest = keys.windows(2).map(|w| w[1] - w[0]).max().unwrap();
        assert!(widest < 3000, "widest gap {widest}");
        assert!(stride(10) != 5 && stride(12) % 2 == 1 && stride(1) == 1);
    }
}
