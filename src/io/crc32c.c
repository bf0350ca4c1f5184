/* CRC-32C of checkpoint datasets: SSE4.2's crc32 instruction where the CPU
   has it, slice-by-8 tables otherwise; and the shift that combines pieces
   (as zlib's crc32_combine does, in GF(2) polynomial arithmetic). */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "ioimpl.h"

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */

static uint32_t table[8][256];
static uint32_t x2n[64]; /* x^(2^k) modulo POLY */
static bool have_sse42;
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
  __builtin_cpu_init();
  have_sse42 = __builtin_cpu_supports("sse4.2");
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
__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t c, const unsigned char *p, size_t len)
{
  uint64_t c64;
  while (len && ((uintptr_t)p & 7)) {
    c = __builtin_ia32_crc32qi(c, *p++);
    len--;
  }
  c64 = c;
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
#endif

uint32_t FSDPCRC32C_Private(uint32_t crc, const void *buf, size_t len)
{
  uint32_t c = ~crc;
  pthread_once(&once, init_tables);
#if defined(__x86_64__) && defined(__GNUC__)
  if (have_sse42) return ~crc_sse42(c, buf, len);
#endif
  return ~crc_tables(c, buf, len);
}

uint32_t FSDPCRC32CShift_Private(uint32_t crc, uint64_t n)
{
  uint32_t p = 1u << 31; /* x^0 */
  pthread_once(&once, init_tables);
  n *= 8; /* bits */
  for (int k = 0; n; k++, n >>= 1)
    if (n & 1) p = multmodp(x2n[k], p);
  return multmodp(p, crc);
}
