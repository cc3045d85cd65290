/* sample-dsp: a fixed-point DSP filter chain over a generated signal.
 *
 * Usage: ./bench [BLOCKS]   (BLOCKS of 256 samples; default 8000)
 *
 * Everything is integer (Q15 samples, Q14 biquad coefficients) so the
 * checksum cannot change with optimisation level or inlining decisions.
 * The many small helpers called from several places are deliberate:
 * each call is an inlining decision point for kiln.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define BLOCK 256
#define NTAPS 31
#define NGOERTZEL 4

/* ---------- small numeric helpers ---------- */

static uint32_t rng_state = 0x2545F491u;

static uint32_t xorshift32(void) {
    uint32_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    rng_state = x;
    return x;
}

static int32_t clamp_i32(int64_t v, int32_t lo, int32_t hi) {
    if (v < lo)
        return lo;
    if (v > hi)
        return hi;
    return (int32_t)v;
}

static int32_t sat16(int64_t v) { return clamp_i32(v, -32768, 32767); }

/* Rounded Q15 multiply; int64 keeps every intermediate free of overflow. */
static int32_t mul_q15(int32_t a, int32_t b) {
    return (int32_t)(((int64_t)a * b + (1 << 14)) >> 15);
}

static int32_t abs_i32(int32_t v) { return v < 0 ? -v : v; }

/* Parabolic sine approximation on a 16-bit phase, refined once; Q15 out. */
static int32_t sine_q15(uint32_t phase) {
    int64_t x = phase & 0xFFFF;
    int64_t sign = 1;
    if (x >= 32768) {
        x -= 32768;
        sign = -1;
    }
    int64_t y = (4 * x * (32768 - x)) >> 15;
    y = y + ((7373 * (((y * y) >> 15) - y)) >> 15);
    return sat16(sign * y);
}

static uint64_t isqrt64(uint64_t v) {
    uint64_t r = 0, bit = (uint64_t)1 << 62;
    while (bit > v)
        bit >>= 2;
    while (bit) {
        if (v >= r + bit) {
            v -= r + bit;
            r = (r >> 1) + bit;
        } else {
            r >>= 1;
        }
        bit >>= 2;
    }
    return r;
}

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0xFF51AFD7ED558CCDull;
}

/* ---------- signal generation ---------- */

typedef struct {
    uint32_t phase, step;
    int32_t amp;
} Osc;

static int32_t osc_next(Osc *o) {
    int32_t s = mul_q15(sine_q15(o->phase), o->amp);
    o->phase += o->step;
    return s;
}

static int32_t noise_q15(int32_t amp) {
    int32_t n = (int32_t)(xorshift32() & 0xFFFF) - 32768;
    return mul_q15(n, amp);
}

static void gen_block(Osc *osc, int nosc, int32_t *out, int n) {
    for (int i = 0; i < n; i++) {
        int64_t s = noise_q15(2000);
        for (int k = 0; k < nosc; k++)
            s += osc_next(&osc[k]);
        if ((xorshift32() & 1023) == 0) /* sparse clicks */
            s += 20000;
        out[i] = sat16(s);
    }
}

/* ---------- filters ---------- */

typedef struct {
    int32_t x1, y1;
} DcBlock;

static int32_t dc_step(DcBlock *d, int32_t x) {
    int32_t y = sat16((int64_t)x - d->x1 + mul_q15(d->y1, 32604)); /* R = 0.995 */
    d->x1 = x;
    d->y1 = y;
    return y;
}

typedef struct {
    int32_t coef[NTAPS];
    int32_t hist[NTAPS];
    int pos;
} Fir;

/* Hann-window low-pass normalised to unity DC gain; cutoff set by width. */
static void fir_init(Fir *f, int width) {
    int64_t sum = 0;
    for (int k = 0; k < NTAPS; k++) {
        int32_t c = 0;
        if (abs_i32(k - NTAPS / 2) <= width) {
            uint32_t ph = (uint32_t)((k - NTAPS / 2 + width + 1) * 32768 / (width + 1));
            c = (32768 - sine_q15(ph + 16384)) / 2;
        }
        f->coef[k] = c;
        f->hist[k] = 0;
        sum += c;
    }
    for (int k = 0; k < NTAPS; k++)
        f->coef[k] = (int32_t)(((int64_t)f->coef[k] * 32768) / sum);
    f->pos = 0;
}

static int32_t fir_dot(const Fir *f) {
    int64_t acc = 0;
    int idx = f->pos;
    for (int k = 0; k < NTAPS; k++) {
        acc += (int64_t)f->coef[k] * f->hist[idx];
        idx = idx + 1 == NTAPS ? 0 : idx + 1;
    }
    return sat16((acc + (1 << 14)) >> 15);
}

static int32_t fir_step(Fir *f, int32_t x) {
    f->pos = f->pos == 0 ? NTAPS - 1 : f->pos - 1;
    f->hist[f->pos] = x;
    return fir_dot(f);
}

static void fir_process(Fir *f, const int32_t *in, int32_t *out, int n) {
    for (int i = 0; i < n; i++)
        out[i] = fir_step(f, in[i]);
}

/* Anti-alias and keep every other sample: only half the dot products. */
static int fir_decimate2(Fir *f, const int32_t *in, int32_t *out, int n) {
    for (int i = 0; i < n; i++) {
        f->pos = f->pos == 0 ? NTAPS - 1 : f->pos - 1;
        f->hist[f->pos] = in[i];
        if (i & 1)
            out[i / 2] = fir_dot(f);
    }
    return n / 2;
}

/* Direct form I biquad, Q14 coefficients (b0 b1 b2 a1 a2). */
typedef struct {
    int32_t b0, b1, b2, a1, a2;
    int32_t x1, x2, y1, y2;
} Biquad;

static void biquad_init(Biquad *q, int32_t b0, int32_t b1, int32_t b2, int32_t a1, int32_t a2) {
    q->b0 = b0; q->b1 = b1; q->b2 = b2; q->a1 = a1; q->a2 = a2;
    q->x1 = q->x2 = q->y1 = q->y2 = 0;
}

static int32_t biquad_step(Biquad *q, int32_t x) {
    int64_t acc = (int64_t)q->b0 * x + (int64_t)q->b1 * q->x1 + (int64_t)q->b2 * q->x2
                - (int64_t)q->a1 * q->y1 - (int64_t)q->a2 * q->y2;
    int32_t y = sat16((acc + (1 << 13)) >> 14);
    q->x2 = q->x1;
    q->x1 = x;
    q->y2 = q->y1;
    q->y1 = y;
    return y;
}

static void biquad_process(Biquad *q, int32_t *buf, int n) {
    for (int i = 0; i < n; i++)
        buf[i] = biquad_step(q, buf[i]);
}

typedef struct {
    int32_t level, attack, release;
} Env;

static int32_t env_step(Env *e, int32_t x) {
    int32_t a = abs_i32(x);
    int32_t coef = a > e->level ? e->attack : e->release;
    e->level = sat16(e->level + mul_q15(a - e->level, coef));
    return e->level;
}

static int32_t env_process(Env *e, const int32_t *buf, int n) {
    int32_t peak = 0;
    for (int i = 0; i < n; i++) {
        int32_t l = env_step(e, buf[i]);
        if (l > peak)
            peak = l;
    }
    return peak;
}

/* Feed-forward compressor: static curve above a threshold, smoothed gain. */
typedef struct {
    Env env;
    int32_t threshold, ratio_q8, gain;
} Comp;

/* Gain for a detector level: unity below the knee, quadratic soft knee,
 * then 1/ratio above it. */
static int32_t comp_gain(const Comp *c, int32_t level) {
    int32_t knee = c->threshold / 4;
    if (level <= c->threshold - knee)
        return 32767;
    int64_t over = (int64_t)level - (c->threshold - knee);
    if (over < 2 * knee)
        over = over * over / (4 * (int64_t)knee);
    else
        over -= knee;
    int64_t target = level - over + over * 256 / c->ratio_q8;
    return clamp_i32(target * 32767 / level, 0, 32767);
}

/* One sample; the detector reads `key`, so this also serves as a ducker. */
static int32_t compress_step(Comp *c, int32_t x, int32_t key) {
    int32_t g = comp_gain(c, env_step(&c->env, key));
    c->gain = clamp_i32(c->gain + mul_q15(g - c->gain, 2000), 0, 32767);
    return sat16(((int64_t)x * c->gain) >> 14); /* 6 dB makeup */
}

static void compress_block(Comp *c, int32_t *buf, int n) {
    for (int i = 0; i < n; i++)
        buf[i] = compress_step(c, buf[i], buf[i]);
}

/* Cubic soft clip y = 1.5x - 0.5x^3 on [-1, 1], with makeup gain in Q15. */
static int32_t soft_clip(int32_t x, int32_t gain) {
    int32_t v = clamp_i32(((int64_t)x * gain) >> 12, -32767, 32767);
    int32_t v3 = mul_q15(mul_q15(v, v), v);
    return sat16(((int64_t)3 * v - v3) / 2);
}

static void soft_clip_block(int32_t *buf, int n, int32_t gain) {
    for (int i = 0; i < n; i++)
        buf[i] = soft_clip(buf[i], gain);
}

/* Goertzel power at bin k of an n-point block; coefficient in Q14. */
static uint64_t goertzel_power(const int32_t *buf, int n, int k) {
    /* 2cos(w) in Q14 has the same bits as cos(w) in Q15. */
    int32_t coef = sine_q15((uint32_t)(k * 65536 / n) + 16384);
    int64_t s1 = 0, s2 = 0;
    for (int i = 0; i < n; i++) {
        int64_t s0 = buf[i] + (((int64_t)coef * s1) >> 14) - s2;
        s0 = clamp_i32(s0, -(1 << 30), 1 << 30);
        s2 = s1;
        s1 = s0;
    }
    int64_t p = s1 * s1 + s2 * s2 - ((((int64_t)coef * s1) >> 14) * s2);
    return (uint64_t)(p < 0 ? -p : p) >> 8;
}

static uint64_t goertzel_bank(uint64_t h, const int32_t *buf, int n, int first, int step) {
    for (int k = 0; k < NGOERTZEL; k++)
        h = mix(h, goertzel_power(buf, n, first + step * k));
    return h;
}

/* ---------- block statistics ---------- */

static uint32_t block_rms(const int32_t *buf, int n) {
    uint64_t acc = 0;
    for (int i = 0; i < n; i++)
        acc += (uint64_t)((int64_t)buf[i] * buf[i]);
    return (uint32_t)isqrt64(acc / (uint64_t)n);
}

static int zero_crossings(const int32_t *buf, int n) {
    int c = 0;
    for (int i = 1; i < n; i++)
        c += (buf[i - 1] < 0) != (buf[i] < 0);
    return c;
}

static uint64_t block_digest(uint64_t h, const int32_t *buf, int n) {
    for (int i = 0; i < n; i += 8)
        h = mix(h, (uint32_t)buf[i]);
    h = mix(h, block_rms(buf, n));
    return mix(h, (uint64_t)zero_crossings(buf, n));
}

/* ---------- the chain ---------- */

typedef struct {
    Osc osc[3];
    DcBlock dc;
    Fir lp, aa;
    Biquad low, peak, post;
    Env env_in, env_out;
    Comp comp_mid, comp_out, duck;
} Chain;

static void chain_init(Chain *c) {
    c->osc[0] = (Osc){0, 65536u * 3 / 256, 9000};
    c->osc[1] = (Osc){0, 65536u * 17 / 256 + 5, 6000};
    c->osc[2] = (Osc){0, 65536u * 45 / 256, 3000};
    c->dc = (DcBlock){0, 0};
    fir_init(&c->lp, 12);
    fir_init(&c->aa, 6);
    biquad_init(&c->low, 1019, 2038, 1019, -23612, 9302);   /* ~0.1 fs low-pass */
    biquad_init(&c->peak, 17100, -26000, 11000, -26000, 11716);
    biquad_init(&c->post, 3582, 7164, 3582, -9800, 7744);
    c->env_in = (Env){0, 6000, 200};
    c->env_out = (Env){0, 3000, 100};
    c->comp_mid = (Comp){{0, 8000, 300}, 9000, 4 * 256, 32767};
    c->comp_out = (Comp){{0, 4000, 150}, 6000, 3 * 256, 32767};
    c->duck = (Comp){{0, 9000, 50}, 5000, 6 * 256, 32767};
}

static uint64_t chain_block(Chain *c, uint64_t h) {
    int32_t a[BLOCK], b[BLOCK], d[BLOCK / 2];
    gen_block(c->osc, 3, a, BLOCK);
    int32_t pk_in = env_process(&c->env_in, a, BLOCK);
    for (int i = 0; i < BLOCK; i++)
        a[i] = dc_step(&c->dc, a[i]);
    fir_process(&c->lp, a, b, BLOCK);
    biquad_process(&c->low, b, BLOCK);
    biquad_process(&c->peak, b, BLOCK);
    compress_block(&c->comp_mid, b, BLOCK);
    /* Automatic gain: drive the clipper harder when the input is quiet. */
    int32_t gain = clamp_i32(4096 + (16384 - (int64_t)pk_in) / 4 - block_rms(b, BLOCK) / 8,
                             2048, 12288);
    soft_clip_block(b, BLOCK, gain);
    int nd = fir_decimate2(&c->aa, b, d, BLOCK);
    biquad_process(&c->post, d, nd);
    compress_block(&c->comp_out, d, nd);
    /* Duck the output when the raw input (a, pre-filter) is loud. */
    for (int i = 0; i < nd; i++)
        d[i] = soft_clip(compress_step(&c->duck, d[i], a[2 * i]), 4096);
    int32_t pk_out = env_process(&c->env_out, d, nd);

    h = mix(h, (uint64_t)pk_in << 16 | (uint32_t)pk_out);
    h = goertzel_bank(h, b, BLOCK, 3, 14);
    h = goertzel_bank(h, d, nd, 2, 9);
    h = block_digest(h, b, BLOCK);
    return block_digest(h, d, nd);
}

int main(int argc, char **argv) {
    long blocks = argc > 1 ? strtol(argv[1], NULL, 10) : 8000;
    if (blocks < 1)
        blocks = 1;
    Chain c;
    chain_init(&c);
    uint64_t h = 0x1234567ull;
    for (long i = 0; i < blocks; i++)
        h = chain_block(&c, h);
    printf("blocks: %ld\n", blocks);
    printf("checksum: %016llx\n", (unsigned long long)h);
    return 0;
}
