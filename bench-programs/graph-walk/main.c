/* graph-walk: shortest paths on a generated graph plus a string workload.
 *
 * Usage: ./bench [SCALE]   (default 50; SCALE rounds over a fixed graph of
 *        8192 nodes, small enough to stay in cache, and 1000*SCALE words)
 *
 * Graph part: a random sparse digraph in CSR form; rounds of Dijkstra
 * (binary heap with decrease-by-reinsert), BFS levels, and a top-k of the
 * farthest nodes that reuses the heap.  String part: random words, FNV
 * hashing into an open-addressing set, and edit distances between words.
 * Only integers are used, and results are folded into one checksum.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEGREE 6
#define NODES 8192
#define INF UINT32_MAX
#define WORD_MAX 16

static uint64_t rng = 0x853C49E6748FEA9Bull;

static uint64_t rng_next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint32_t rng_below(uint32_t n) { return (uint32_t)(rng_next() % n); }

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0xFF51AFD7ED558CCDull;
}

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n, size);
    if (!p) {
        printf("out of memory\n");
        exit(1);
    }
    return p;
}

/* ---------- graph in CSR form ---------- */

typedef struct {
    uint32_t n, m;
    uint32_t *start; /* n + 1 offsets into dst/w */
    uint32_t *dst, *w;
} Graph;

/* Each node gets DEGREE random out-edges plus a ring edge, so every node is
 * reachable.  Edges are generated per node, so CSR falls out directly. */
static void graph_build(Graph *g, uint32_t n) {
    g->n = n;
    g->m = n * (DEGREE + 1);
    g->start = xcalloc(n + 1, sizeof *g->start);
    g->dst = xcalloc(g->m, sizeof *g->dst);
    g->w = xcalloc(g->m, sizeof *g->w);
    uint32_t e = 0;
    for (uint32_t u = 0; u < n; u++) {
        g->start[u] = e;
        g->dst[e] = (u + 1) % n;
        g->w[e++] = 50 + rng_below(50);
        for (int k = 0; k < DEGREE; k++) {
            /* Mostly local edges, some long jumps: a small-world shape. */
            uint32_t v = k < 4 ? (u + 1 + rng_below(64)) % n : rng_below(n);
            g->dst[e] = v;
            g->w[e++] = 1 + rng_below(100);
        }
    }
    g->start[n] = e;
}

static void graph_free(Graph *g) {
    free(g->start);
    free(g->dst);
    free(g->w);
}

/* ---------- binary min-heap of (key, node) ---------- */

typedef struct {
    uint32_t key, node;
} Item;

typedef struct {
    Item *a;
    uint32_t len, cap;
} Heap;

static int item_less(Item x, Item y) {
    return x.key < y.key || (x.key == y.key && x.node < y.node);
}

static void item_swap(Item *x, Item *y) {
    Item t = *x;
    *x = *y;
    *y = t;
}

static void sift_up(Heap *h, uint32_t i) {
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (!item_less(h->a[i], h->a[p]))
            break;
        item_swap(&h->a[i], &h->a[p]);
        i = p;
    }
}

static void sift_down(Heap *h, uint32_t i) {
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, best = i;
        if (l < h->len && item_less(h->a[l], h->a[best]))
            best = l;
        if (r < h->len && item_less(h->a[r], h->a[best]))
            best = r;
        if (best == i)
            return;
        item_swap(&h->a[i], &h->a[best]);
        i = best;
    }
}

static void heap_push(Heap *h, uint32_t key, uint32_t node) {
    if (h->len == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 64;
        h->a = realloc(h->a, h->cap * sizeof *h->a);
        if (!h->a) {
            printf("out of memory\n");
            exit(1);
        }
    }
    h->a[h->len] = (Item){key, node};
    sift_up(h, h->len++);
}

static Item heap_pop(Heap *h) {
    Item top = h->a[0];
    h->a[0] = h->a[--h->len];
    sift_down(h, 0);
    return top;
}

/* ---------- graph algorithms ---------- */

/* Lazy-deletion Dijkstra: stale heap entries are skipped on pop. */
static void dijkstra(const Graph *g, uint32_t src, uint32_t *dist, Heap *h) {
    for (uint32_t i = 0; i < g->n; i++)
        dist[i] = INF;
    h->len = 0;
    dist[src] = 0;
    heap_push(h, 0, src);
    while (h->len) {
        Item it = heap_pop(h);
        if (it.key != dist[it.node])
            continue;
        for (uint32_t e = g->start[it.node]; e < g->start[it.node + 1]; e++) {
            uint32_t v = g->dst[e], nd = it.key + g->w[e];
            if (nd < dist[v]) {
                dist[v] = nd;
                heap_push(h, nd, v);
            }
        }
    }
}

static uint32_t bfs(const Graph *g, uint32_t src, uint32_t *level, uint32_t *queue) {
    uint32_t head = 0, tail = 0, maxl = 0;
    for (uint32_t i = 0; i < g->n; i++)
        level[i] = INF;
    level[src] = 0;
    queue[tail++] = src;
    while (head < tail) {
        uint32_t u = queue[head++];
        for (uint32_t e = g->start[u]; e < g->start[u + 1]; e++) {
            uint32_t v = g->dst[e];
            if (level[v] == INF) {
                level[v] = level[u] + 1;
                if (level[v] > maxl)
                    maxl = level[v];
                queue[tail++] = v;
            }
        }
    }
    return maxl;
}

/* The k largest distances, via a size-k min-heap (keys are distances). */
static uint64_t top_k_far(const uint32_t *dist, uint32_t n, uint32_t k, Heap *h, uint64_t acc) {
    h->len = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (h->len < k) {
            heap_push(h, dist[i], i);
        } else if (item_less(h->a[0], (Item){dist[i], i})) {
            h->a[0] = (Item){dist[i], i};
            sift_down(h, 0);
        }
    }
    while (h->len) {
        Item it = heap_pop(h);
        acc = mix(acc, (uint64_t)it.key << 32 | it.node);
    }
    return acc;
}

static uint64_t fold_array(uint64_t acc, const uint32_t *a, uint32_t n) {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < n; i++)
        sum += a[i] == INF ? 0 : a[i];
    return mix(acc, sum);
}

/* Best meeting node for two walkers: min over v of max(da[v], db[v]). */
static uint64_t meeting_point(const uint32_t *da, const uint32_t *db, uint32_t n) {
    uint32_t best = INF, at = 0;
    for (uint32_t v = 0; v < n; v++) {
        uint32_t d = da[v] > db[v] ? da[v] : db[v];
        if (d < best) {
            best = d;
            at = v;
        }
    }
    return (uint64_t)best << 32 | at;
}

/* ---------- strings ---------- */

typedef struct {
    char s[WORD_MAX + 1];
    int len;
} Word;

static void random_word(Word *w) {
    static const char alphabet[] = "etaoinshrdlucmfw";
    w->len = 3 + (int)rng_below(WORD_MAX - 3);
    for (int i = 0; i < w->len; i++)
        w->s[i] = alphabet[rng_below(16)];
    w->s[w->len] = 0;
}

static uint32_t fnv1a(const char *s, int len) {
    uint32_t h = 2166136261u;
    for (int i = 0; i < len; i++) {
        h ^= (uint8_t)s[i];
        h *= 16777619u;
    }
    return h;
}

static int min3(int a, int b, int c) {
    int m = a < b ? a : b;
    return m < c ? m : c;
}

/* Levenshtein distance with two rolling rows. */
static int edit_distance(const Word *a, const Word *b) {
    int prev[WORD_MAX + 1], cur[WORD_MAX + 1];
    for (int j = 0; j <= b->len; j++)
        prev[j] = j;
    for (int i = 1; i <= a->len; i++) {
        cur[0] = i;
        for (int j = 1; j <= b->len; j++) {
            int cost = a->s[i - 1] != b->s[j - 1];
            cur[j] = min3(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost);
        }
        memcpy(prev, cur, sizeof(int) * (size_t)(b->len + 1));
    }
    return prev[b->len];
}

/* Open-addressing set of word indices; returns 1 if an equal word exists. */
static int set_insert(uint32_t *slots, uint32_t mask, const Word *words, uint32_t idx) {
    const Word *w = &words[idx];
    uint32_t i = fnv1a(w->s, w->len) & mask;
    while (slots[i]) {
        const Word *o = &words[slots[i] - 1];
        if (o->len == w->len && memcmp(o->s, w->s, (size_t)w->len) == 0)
            return 1;
        i = (i + 1) & mask;
    }
    slots[i] = idx + 1;
    return 0;
}

static void mutate(Word *dst, const Word *src) {
    *dst = *src;
    int pos = (int)rng_below((uint32_t)dst->len);
    dst->s[pos] = (char)('a' + rng_below(26));
}

static uint64_t string_work(uint32_t nwords, uint64_t acc) {
    Word *words = xcalloc(nwords, sizeof *words);
    uint32_t cap = 1;
    while (cap < 2 * nwords)
        cap *= 2;
    uint32_t *slots = xcalloc(cap, sizeof *slots);
    uint64_t dups = 0, dsum = 0, msum = 0;
    for (uint32_t i = 0; i < nwords; i++) {
        random_word(&words[i]);
        /* Short words repeat often, so the duplicate path is exercised. */
        dups += (uint64_t)set_insert(slots, cap - 1, words, i);
    }
    for (uint32_t i = 1; i < nwords; i++) {
        dsum += (uint64_t)edit_distance(&words[i - 1], &words[i]);
        Word m;
        mutate(&m, &words[i]);
        msum += (uint64_t)edit_distance(&words[i], &m);
    }
    free(slots);
    free(words);
    return mix(mix(mix(acc, dups), dsum), msum);
}

int main(int argc, char **argv) {
    long scale = argc > 1 ? strtol(argv[1], NULL, 10) : 50;
    if (scale < 1)
        scale = 1;
    uint32_t n = NODES;
    Graph g;
    graph_build(&g, n);
    uint32_t *dist = xcalloc(n, sizeof *dist);
    uint32_t *dist2 = xcalloc(n, sizeof *dist2);
    uint32_t *level = xcalloc(n, sizeof *level);
    uint32_t *level2 = xcalloc(n, sizeof *level2);
    uint32_t *queue = xcalloc(n, sizeof *queue);
    Heap h = {0, 0, 0};
    uint64_t acc = 0xC0FFEE;
    for (long r = 0; r < scale; r++) {
        uint32_t a = rng_below(n), b = rng_below(n);
        dijkstra(&g, a, dist, &h);
        dijkstra(&g, b, dist2, &h);
        acc = fold_array(acc, dist, n);
        acc = top_k_far(dist, n, 16, &h, acc);
        acc = mix(acc, meeting_point(dist, dist2, n));
        acc = mix(acc, bfs(&g, a, level, queue));
        acc = mix(acc, bfs(&g, b, level2, queue));
        acc = fold_array(acc, level, n);
        acc = mix(acc, meeting_point(level, level2, n));
    }
    printf("nodes: %u edges: %u\n", g.n, g.m);
    acc = string_work((uint32_t)(1000 * scale), acc);
    free(h.a);
    free(queue);
    free(level2);
    free(level);
    free(dist2);
    free(dist);
    graph_free(&g);
    printf("checksum: %016llx\n", (unsigned long long)acc);
    return 0;
}
