/* CRC-32C of checkpoint datasets: carry-less multiplication on AVX-512
   (VPCLMULQDQ) where the CPU has it, else SSE4.2's crc32 instruction, else
   slice-by-8 tables; and the shift that combines pieces (as zlib's
   crc32_combine does, in GF(2) polynomial arithmetic).  The instruction
   takes 3 cycles and issues every cycle, so long buffers go as three
   interleaved streams of LANE bytes, joined by that same shift: 8 bytes a
   cycle at most.  Folding with VPCLMULQDQ (Intel's "Fast CRC computation
   for generic polynomials using PCLMULQDQ", on four 512-bit registers) does
   64 bytes in two multiplications. */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "ioimpl.h"

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */

static uint32_t table[8][256];
static uint32_t x2n[64]; /* x^(2^k) modulo POLY */
#if defined(__x86_64__) && defined(__GNUC__)
/* 4 KB lanes: 2 KB ones were 30% slower on a long buffer */
enum { LANE = 4096 };
static uint32_t lane_shift[4][256]; /* c times x^(8 LANE) modulo POLY, a byte of c at a time */
static bool have_sse42, have_vpclmul;
/* Folding a 128-bit block (lo, hi: its first and second 8 bytes) onto the
   block D bits later: lo times x^(D+31) plus hi times x^(D-33), modulo POLY. */
enum { FOLD2048, FOLD512, FOLD384, FOLD256, FOLD128, NFOLDS };
static const unsigned fold_bits[NFOLDS] = {2048, 512, 384, 256, 128};
static uint32_t fold_lo[NFOLDS], fold_hi[NFOLDS];
#endif
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* a times b modulo POLY, reflected (bit 31 is x^0). */
static uint32_t multmodp(uint32_t a, uint32_t b)
{
  uint32_t m = 1u << 31, p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    m >>= 1;
    b = b & 1 ? (b >> 1) ^ POLY : b >> 1;
  }
  return p;
}

/* x^n modulo POLY, reflected. */
static uint32_t xpow(uint64_t n)
{
  uint32_t p = 1u << 31; /* x^0 */
  for (int k = 0; n; k++, n >>= 1)
    if (n & 1) p = multmodp(x2n[k], p);
  return p;
}

static void init_tables(void)
{
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
    table[0][i] = c;
  }
  for (int t = 1; t < 8; t++)
    for (int i = 0; i < 256; i++) table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
  x2n[0] = 1u << 30; /* x^1 */
  for (int k = 1; k < 64; k++) x2n[k] = multmodp(x2n[k - 1], x2n[k - 1]);
#if defined(__x86_64__) && defined(__GNUC__)
  {
    uint32_t p = xpow(8 * LANE);
    for (int t = 0; t < 4; t++)
      for (uint32_t b = 0; b < 256; b++) lane_shift[t][b] = multmodp(p, b << (8 * t));
    for (int f = 0; f < NFOLDS; f++) {
      fold_lo[f] = xpow(fold_bits[f] + 31);
      fold_hi[f] = xpow(fold_bits[f] - 33);
    }
  }
  __builtin_cpu_init();
  have_sse42 = __builtin_cpu_supports("sse4.2");
  have_vpclmul = have_sse42 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq");
#endif
}

static uint32_t crc_tables(uint32_t c, const unsigned char *p, size_t len)
{
  while (len && ((uintptr_t)p & 7)) {
    c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
    len--;
  }
  while (len >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    w ^= c; /* little-endian: the low bytes come first */
    c = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^ table[4][(w >> 24) & 0xff] ^
        table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^ table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
    p += 8;
    len -= 8;
  }
  while (len--) c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
  return c;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The CRC register c after LANE zero bytes: c x^(8 LANE), which is linear in c. */
static uint32_t shift_lane(uint32_t c)
{
  return lane_shift[0][c & 0xff] ^ lane_shift[1][(c >> 8) & 0xff] ^ lane_shift[2][(c >> 16) & 0xff] ^
         lane_shift[3][c >> 24];
}

__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t c, const unsigned char *p, size_t len)
{
  uint64_t c64;
  while (len && ((uintptr_t)p & 7)) {
    c = __builtin_ia32_crc32qi(c, *p++);
    len--;
  }
  c64 = c;
  /* The register after A B C is that after A, shifted past B and C, xor the
     registers of B and of C alone (from 0), shifted past what follows them. */
  while (len >= 3 * LANE) {
    uint64_t a = c64, b = 0, d = 0;
    for (size_t i = 0; i < LANE; i += 8) {
      uint64_t w0, w1, w2;
      memcpy(&w0, p + i, 8);
      memcpy(&w1, p + LANE + i, 8);
      memcpy(&w2, p + 2 * LANE + i, 8);
      a = __builtin_ia32_crc32di(a, w0);
      b = __builtin_ia32_crc32di(b, w1);
      d = __builtin_ia32_crc32di(d, w2);
    }
    c64 = shift_lane(shift_lane((uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)d;
    p += 3 * LANE;
    len -= 3 * LANE;
  }
  while (len >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    c64 = __builtin_ia32_crc32di(c64, w);
    p += 8;
    len -= 8;
  }
  c = (uint32_t)c64;
  while (len--) c = __builtin_ia32_crc32qi(c, *p++);
  return c;
}

#define VPCLMUL_TARGET __attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.2")))
/* The four registers stay registers only if their loops are unrolled (-O2 does not). */
#define UNROLL4 _Pragma("GCC unroll 4")

/* x folded onto the block f's distance later, xor next. */
VPCLMUL_TARGET static inline __m512i fold512(__m512i x, __m512i k, __m512i next)
{
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11), next,
                                   0x96); /* a ^ b ^ c */
}

VPCLMUL_TARGET static inline __m128i fold128(__m128i x, int f)
{
  __m128i k = _mm_set_epi64x(fold_hi[f], fold_lo[f]);
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

VPCLMUL_TARGET static inline __m512i fold_key(int f)
{
  return _mm512_broadcast_i32x4(_mm_set_epi64x(fold_hi[f], fold_lo[f]));
}

/* The float32 lanes of x that may be refused (checkpoint checks): an
   exponent of all ones (NaN or infinity), and a sign bit with more than -0
   (a negative value, or a NaN with its sign: the caller looks closer). */
VPCLMUL_TARGET static inline void flag(__m512i x, __mmask16 *nonfinite, __mmask16 *negative)
{
  const __m512i exponent = _mm512_set1_epi32(0x7f800000), minus_zero = _mm512_set1_epi32((int)0x80000000u);
  *nonfinite |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(x, exponent), exponent);
  *negative |= _mm512_cmpgt_epu32_mask(x, minus_zero);
}

/* 256 bytes at p in four registers, flagged if check. */
VPCLMUL_TARGET __attribute__((always_inline)) static inline void load256(const unsigned char *p, __m512i v[4],
                                                                         bool check, __mmask16 *nonfinite,
                                                                         __mmask16 *negative)
{
  UNROLL4 for (int i = 0; i < 4; i++)
  {
    v[i] = _mm512_loadu_si512(p + 64 * i);
    if (check) flag(v[i], nonfinite, negative);
  }
}

/* At least 256 bytes.  Four registers of 64 bytes run 256 bytes apart; the
   register c enters as an xor on the first 4 bytes (the CRC is linear); the
   last 128-bit remainder goes through the crc32 instruction from 0.  With
   check, every 64 bytes loaded are also flagged, up to the last multiple of 64. */
VPCLMUL_TARGET __attribute__((always_inline)) static inline uint32_t crc_vpclmul_body(
    uint32_t c, const unsigned char *p, size_t len, bool check, __mmask16 *nonfinite, __mmask16 *negative)
{
  __m512i k = fold_key(FOLD2048), x[4], next[4], y;
  __m128i r;
  uint64_t c64;

  load256(p, x, check, nonfinite, negative);
  x[0] = _mm512_xor_si512(x[0], _mm512_maskz_set1_epi32(1, (int)c)); /* c in the first lane, zeros elsewhere */
  for (p += 256, len -= 256; len >= 256; p += 256, len -= 256) {
    load256(p, next, check, nonfinite, negative);
    UNROLL4 for (int i = 0; i < 4; i++) x[i] = fold512(x[i], k, next[i]);
  }
  k = fold_key(FOLD512);
  UNROLL4 for (int i = 1; i < 4; i++) x[i] = fold512(x[i - 1], k, x[i]);
  for (; len >= 64; p += 64, len -= 64) {
    y = _mm512_loadu_si512(p);
    if (check) flag(y, nonfinite, negative);
    x[3] = fold512(x[3], k, y);
  }
  r = _mm_xor_si128(
      _mm_xor_si128(fold128(_mm512_extracti32x4_epi32(x[3], 0), FOLD384),
                    fold128(_mm512_extracti32x4_epi32(x[3], 1), FOLD256)),
      _mm_xor_si128(fold128(_mm512_extracti32x4_epi32(x[3], 2), FOLD128), _mm512_extracti32x4_epi32(x[3], 3)));
  for (; len >= 16; p += 16, len -= 16) r = _mm_xor_si128(fold128(r, FOLD128), _mm_loadu_si128((const __m128i *)p));
  c64 = __builtin_ia32_crc32di(0, (uint64_t)_mm_cvtsi128_si64(r));
  c64 = __builtin_ia32_crc32di(c64, (uint64_t)_mm_extract_epi64(r, 1));
  c = (uint32_t)c64;
  while (len--) c = __builtin_ia32_crc32qi(c, *p++);
  return c;
}

VPCLMUL_TARGET static uint32_t crc_vpclmul(uint32_t c, const unsigned char *p, size_t len)
{
  return crc_vpclmul_body(c, p, len, false, NULL, NULL);
}

VPCLMUL_TARGET static uint32_t crc_vpclmul_flags(uint32_t c, const unsigned char *p, size_t len, bool *nonfinite,
                                                 bool *negative)
{
  __mmask16 nf = 0, neg = 0;
  c = crc_vpclmul_body(c, p, len, true, &nf, &neg);
  *nonfinite = nf;
  *negative = neg;
  return c;
}
#endif

uint32_t FSDPCRC32C_Private(uint32_t crc, const void *buf, size_t len)
{
  uint32_t c = ~crc;
  pthread_once(&once, init_tables);
#if defined(__x86_64__) && defined(__GNUC__)
  if (have_vpclmul && len >= 256) return ~crc_vpclmul(c, buf, len);
  if (have_sse42) return ~crc_sse42(c, buf, len);
#endif
  return ~crc_tables(c, buf, len);
}

bool FSDPCRC32CFlagFloats_Private(uint32_t *crc, const void *buf, size_t len, bool *nonfinite, bool *negative)
{
  pthread_once(&once, init_tables);
#if defined(__x86_64__) && defined(__GNUC__)
  if (have_vpclmul && len >= 256 && len % 64 == 0) {
    *crc = ~crc_vpclmul_flags(~*crc, buf, len, nonfinite, negative);
    return true;
  }
#endif
  (void)crc;
  (void)buf;
  (void)nonfinite;
  (void)negative;
  return false;
}

uint32_t FSDPCRC32CShift_Private(uint32_t crc, uint64_t n)
{
  pthread_once(&once, init_tables);
  return multmodp(xpow(8 * n), crc);
}
