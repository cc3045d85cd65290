// rust-sort: tokenizer + word-count hash table + merge sort, in one file.
//
// Build: rustc -O main.rs -o bench      Usage: ./bench [SCALE]   (default 60)
//
// Generates SCALE * 10000 pseudo-words of text, tokenizes it, counts words
// in an open-addressing table (own FNV hash, so no random seeding), sorts the
// (count, word) entries and SCALE * 20000 random keys with a merge sort, and
// folds everything into one checksum.  Only std, no Cargo, no unsafe.
// Helpers take slices rather than Vecs and use plain loops: slice indexing is
// built into the language, so fewer std calls become inlining sites (with the
// MIR inliner off, Vec/RawVec/fmt internals still contribute most of them).

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn mix(h: u64, v: u64) -> u64 {
    let h = h ^ v.wrapping_add(0x9E37_79B9_7F4A_7C15).wrapping_add(h << 6).wrapping_add(h >> 2);
    h.wrapping_mul(0xFF51_AFD7_ED55_8CCD)
}

// ---------- text generation ----------

const SYLLABLES: [&[u8]; 16] = [
    b"ka", b"lo", b"mi", b"ne", b"ru", b"sa", b"ti", b"vo", b"zen", b"dra", b"qua", b"pel",
    b"Or", b"Ba", b"th", b"ix",
];
const PUNCT: &[u8] = b",.;:!?";

fn push_word(text: &mut Vec<u8>, rng: &mut Rng) {
    // Skewed length and syllable choice give a Zipf-like word distribution.
    let syl = 1 + (rng.below(8) * rng.below(8) / 16) as usize;
    for _ in 0..syl {
        let s = (rng.below(16) * rng.below(16) / 16) as usize;
        text.extend_from_slice(SYLLABLES[s]);
    }
}

fn gen_text(words: usize, rng: &mut Rng) -> Vec<u8> {
    let mut text = Vec::with_capacity(words * 8);
    for i in 0..words {
        push_word(&mut text, rng);
        if rng.below(9) == 0 {
            text.push(PUNCT[i % PUNCT.len()]);
        }
        text.push(if rng.below(12) == 0 { b'\n' } else { b' ' });
    }
    text
}

// ---------- tokenizer ----------

#[derive(Clone, Copy)]
struct Span {
    start: u32,
    len: u32,
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

fn lower(b: u8) -> u8 {
    if b.is_ascii_uppercase() { b + 32 } else { b }
}

// Lower-cases in place and records each word's span; returns the count of
// punctuation bytes seen, which goes into the checksum.
fn tokenize(text: &mut [u8], out: &mut Vec<Span>) -> u64 {
    let mut i = 0;
    let mut punct = 0u64;
    while i < text.len() {
        if !is_word_byte(text[i]) {
            if text[i] != b' ' && text[i] != b'\n' {
                punct += 1;
            }
            i += 1;
            continue;
        }
        let start = i;
        while i < text.len() && is_word_byte(text[i]) {
            text[i] = lower(text[i]);
            i += 1;
        }
        out.push(Span { start: start as u32, len: (i - start) as u32 });
    }
    punct
}

fn word<'a>(text: &'a [u8], s: Span) -> &'a [u8] {
    &text[s.start as usize..(s.start + s.len) as usize]
}

// ---------- open-addressing word counter ----------

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = 0xCBF2_9CE4_8422_2325u64;
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
        i += 1;
    }
    h
}

// count == 0 marks an empty slot.
#[derive(Clone, Copy)]
struct Entry {
    span: Span,
    count: u32,
}

const EMPTY: Entry = Entry { span: Span { start: 0, len: 0 }, count: 0 };

struct Table {
    slots: Vec<Entry>,
    used: usize,
}

// Linear probing; the first empty slot or the slot holding `w`.
fn probe(slots: &[Entry], text: &[u8], w: &[u8]) -> usize {
    let mask = slots.len() - 1;
    let mut i = fnv1a(w) as usize & mask;
    while slots[i].count != 0 && word(text, slots[i].span) != w {
        i = (i + 1) & mask;
    }
    i
}

fn rehash(old: &[Entry], new: &mut [Entry], text: &[u8]) {
    for i in 0..old.len() {
        if old[i].count != 0 {
            let j = probe(new, text, word(text, old[i].span));
            new[j] = old[i];
        }
    }
}

fn table_add(t: &mut Table, text: &[u8], s: Span) {
    if 4 * (t.used + 1) > 3 * t.slots.len() {
        let mut bigger = vec![EMPTY; t.slots.len() * 2];
        rehash(&t.slots, &mut bigger, text);
        t.slots = bigger;
    }
    let slots = &mut t.slots[..];
    let i = probe(slots, text, word(text, s));
    if slots[i].count == 0 {
        slots[i] = Entry { span: s, count: 1 };
        t.used += 1;
    } else {
        slots[i].count += 1;
    }
}

// ---------- merge sort ----------

fn insertion_sort<T: Copy, F: Fn(&T, &T) -> bool>(v: &mut [T], less: &F) {
    for i in 1..v.len() {
        let x = v[i];
        let mut j = i;
        while j > 0 && less(&x, &v[j - 1]) {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
}

fn merge<T: Copy, F: Fn(&T, &T) -> bool>(a: &[T], b: &[T], out: &mut [T], less: &F) {
    let (mut i, mut j, mut k) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        // Take from b only when strictly smaller: keeps the sort stable.
        if less(&b[j], &a[i]) {
            out[k] = b[j];
            j += 1;
        } else {
            out[k] = a[i];
            i += 1;
        }
        k += 1;
    }
    out[k..k + a.len() - i].copy_from_slice(&a[i..]);
    let k = k + a.len() - i;
    out[k..].copy_from_slice(&b[j..]);
}

// Top-down merge sort using `tmp` (same length) as scratch.
fn merge_sort<T: Copy, F: Fn(&T, &T) -> bool>(v: &mut [T], tmp: &mut [T], less: &F) {
    let n = v.len();
    if n <= 24 {
        insertion_sort(v, less);
        return;
    }
    let mid = n / 2;
    {
        let (lo, hi) = v.split_at_mut(mid);
        let (tlo, thi) = tmp.split_at_mut(mid);
        merge_sort(lo, tlo, less);
        merge_sort(hi, thi, less);
    }
    merge(&v[..mid], &v[mid..], tmp, less);
    v.copy_from_slice(tmp);
}

fn sort_by<T: Copy, F: Fn(&T, &T) -> bool>(v: &mut [T], less: F) {
    if v.is_empty() {
        return;
    }
    let mut tmp = vec![v[0]; v.len()];
    merge_sort(v, &mut tmp, &less);
}

// ---------- checks and checksum ----------

fn is_sorted_by<T, F: Fn(&T, &T) -> bool>(v: &[T], less: F) -> bool {
    let mut i = 1;
    while i < v.len() {
        if less(&v[i], &v[i - 1]) {
            return false;
        }
        i += 1;
    }
    true
}

// Most frequent first, ties alphabetical.
fn entry_less(text: &[u8], a: &Entry, b: &Entry) -> bool {
    if a.count != b.count {
        return a.count > b.count;
    }
    word(text, a.span) < word(text, b.span)
}

fn key_less(a: &u64, b: &u64) -> bool {
    (a & 0xFFFF, *a) < (b & 0xFFFF, *b)
}

fn fold_words(text: &[u8], entries: &[Entry], take: usize, mut h: u64) -> u64 {
    let mut i = 0;
    while i < take && i < entries.len() {
        let e = entries[i];
        h = mix(h, fnv1a(word(text, e.span)) ^ (e.count as u64) << 40);
        i += 1;
    }
    h
}

fn fold_keys(keys: &[u64], step: usize, mut h: u64) -> u64 {
    let mut i = 0;
    while i < keys.len() {
        h = mix(h, keys[i]);
        i += step;
    }
    h
}

fn main() {
    let arg = std::env::args().nth(1);
    let scale: usize = match arg {
        Some(s) => s.parse().unwrap_or(1),
        None => 60,
    };
    let scale = if scale < 1 { 1 } else { scale };
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);

    let mut text = gen_text(scale * 10_000, &mut rng);
    let mut spans = Vec::new();
    let punct = tokenize(&mut text, &mut spans);
    let mut table = Table { slots: vec![EMPTY; 64], used: 0 };
    for i in 0..spans.len() {
        table_add(&mut table, &text, spans[i]);
    }
    let mut entries = Vec::with_capacity(table.used);
    for i in 0..table.slots.len() {
        if table.slots[i].count != 0 {
            entries.push(table.slots[i]);
        }
    }
    sort_by(&mut entries, |a, b| entry_less(&text, a, b));
    let ok_words = is_sorted_by(&entries, |a, b| entry_less(&text, a, b));

    // Keys with many duplicates in the low bits, sorted by (low 16 bits, all).
    let mut keys = Vec::with_capacity(scale * 20_000);
    for _ in 0..scale * 20_000 {
        keys.push(rng.next());
    }
    sort_by(&mut keys, key_less);
    let ok_keys = is_sorted_by(&keys, key_less);

    let mut h = mix(0x5EED, punct);
    h = mix(h, spans.len() as u64);
    h = mix(h, entries.len() as u64);
    h = fold_words(&text, &entries, 50, h);
    h = fold_keys(&keys, 97, h);
    println!("tokens: {} distinct: {} sorted: {}", spans.len(), entries.len(), ok_words && ok_keys);
    println!("checksum: {:016x}", h);
}
