/* The CRC-32C of checkpoints, every path the CPU has (VPCLMULQDQ folding,
   SSE4.2's three lanes, the tables) and the dispatcher, against the bitwise
   CRC of formattest.h: every length to 1,100 bytes (the folding's 256-byte
   start, its 64- and 16-byte tails), lengths to 1 MB at every alignment
   mod 64, CRCs carried in from before, the shift that joins pieces, and the
   folding pass's flags of float32 values a checkpoint load refuses.
   White-box: it compiles src/io/crc32c.c in, to call each path.
   mpitest: -n 1 */
#include "fsdp_config.h"

#ifndef FSDP_HAVE_HDF5
int main(void) { return 77; } /* built without HDF5: no checkpoints, and crc32c.c is not built */
#else
#include "../src/io/crc32c.c"

#include "formattest.h"

typedef uint32_t (*CRCPath)(uint32_t c, const unsigned char *p, size_t len);
typedef struct {
  const char *name;
  CRCPath path;   /* NULL: the dispatcher */
  size_t min_len; /* what the path takes */
} Path;

/* A path works on registers (~crc in, ~ out), as FSDPCRC32C_Private calls it. */
static uint32_t via(CRCPath path, uint32_t crc, const unsigned char *p, size_t len) { return ~path(~crc, p, len); }

static uint64_t state = 0x9e3779b97f4a7c15ULL;
static uint32_t next_random(void)
{
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return (uint32_t)(state >> 16);
}

static int check(const char *name, CRCPath path, size_t min_len, const unsigned char *buf, size_t len, uint32_t crc)
{
  uint32_t want, got;
  if (len < min_len) return 0;
  want = crc32c_extend(crc, buf, len);
  got = path ? via(path, crc, buf, len) : FSDPCRC32C_Private(crc, buf, len);
  TEST_ASSERT(got == want, "%s: %zu bytes at offset %zu mod 64 from CRC 0x%08x: 0x%08x, the bitwise CRC is 0x%08x",
              name, len, (size_t)((uintptr_t)buf % 64), crc, got, want);
  return 1;
}

int main(void)
{
  enum { MAX = 1 << 20 };
  Path paths[4] = {{"FSDPCRC32C_Private", NULL, 0}, {"tables", crc_tables, 0}};
  int npaths = 2;
  unsigned char *mem = malloc(MAX + 128);
  long checks = 0;

  TEST_ASSERT(mem, "out of memory");
  for (size_t i = 0; i < MAX + 128; i++) mem[i] = (unsigned char)next_random();
  TEST_ASSERT(FSDPCRC32C_Private(0, "123456789", 9) == 0xe3069283u, "the check value of '123456789' is 0x%08x",
              FSDPCRC32C_Private(0, "123456789", 9)); /* also runs init_tables */
#if defined(__x86_64__) && defined(__GNUC__)
  if (have_sse42) paths[npaths++] = (Path){"sse4.2", crc_sse42, 0};
  if (have_vpclmul) paths[npaths++] = (Path){"vpclmulqdq", crc_vpclmul, 256};
  printf("paths: tables%s%s\n", have_sse42 ? ", sse4.2" : "", have_vpclmul ? ", vpclmulqdq" : " (no VPCLMULQDQ here)");
#endif
  for (int k = 0; k < npaths; k++) {
    for (size_t len = 0; len <= 1100; len++)
      checks += check(paths[k].name, paths[k].path, paths[k].min_len, mem + len % 61, len, next_random());
    for (int t = 0; t < 40; t++) {
      size_t len = next_random() % (t < 8 ? MAX : 70000), at = next_random() % 64;
      checks += check(paths[k].name, paths[k].path, paths[k].min_len, mem + at, len, t % 2 ? next_random() : 0);
    }
  }
  /* The float32 flags of the folding pass: set by a value planted anywhere
     in what it covers, and by nothing else (-0, denormals, large finite
     values, and NaN payloads' low bits are not flagged). */
#if defined(__x86_64__) && defined(__GNUC__)
  if (have_vpclmul) {
    float *f = (float *)(void *)mem;
    const struct {
      uint32_t bits;
      bool nonfinite, negative;
    } plant[] = {{0x7f800000u, true, false},  {0xff800000u, true, true},   {0x7fc00001u, true, false},
                 {0xffc00000u, true, true},   {0x80000001u, false, true},  {0xbf800000u, false, true},
                 {0x80000000u, false, false}, {0x7f7fffffu, false, false}, {0x00000001u, false, false}};
    for (size_t i = 0; i < MAX / 4; i++) f[i] = (float)(next_random() % 1000) * 0.001f; /* finite, >= 0 */
    for (int t = 0; t < 60; t++) {
      size_t len = 256 + 64 * (next_random() % 3000), at = next_random() % (len / 4), p = (size_t)t % 9;
      uint32_t old, crc = next_random(), want;
      bool nonfinite = true, negative = true;
      memcpy(&old, &f[at], 4);
      if (t % 2) memcpy(&f[at], &plant[p].bits, 4);
      want = crc32c_extend(crc, f, len);
      TEST_ASSERT(FSDPCRC32CFlagFloats_Private(&crc, f, len, &nonfinite, &negative), "no flagging pass");
      TEST_ASSERT(crc == want, "flagging pass over %zu bytes: CRC 0x%08x, the bitwise CRC is 0x%08x", len, crc, want);
      TEST_ASSERT(nonfinite == (t % 2 && plant[p].nonfinite) && negative == (t % 2 && plant[p].negative),
                  "0x%08x at value %zu of %zu: flagged non-finite %d, negative %d", t % 2 ? plant[p].bits : 0, at,
                  len / 4, nonfinite, negative);
      memcpy(&f[at], &old, 4);
      checks++;
    }
  }
#endif
  /* Pieces join: crc(A B) = shift(crc(A), |B|) xor crc(B). */
  for (int t = 0; t < 20; t++) {
    size_t a = next_random() % 70000, b = next_random() % 70000;
    uint32_t whole = FSDPCRC32C_Private(0, mem, a + b);
    uint32_t joined = FSDPCRC32CShift_Private(FSDPCRC32C_Private(0, mem, a), b) ^ FSDPCRC32C_Private(0, mem + a, b);
    TEST_ASSERT(joined == whole, "pieces of %zu and %zu bytes join to 0x%08x, the whole is 0x%08x", a, b, joined,
                whole);
    checks++;
  }
  printf("%ld checks passed\n", checks);
  free(mem);
  return 0;
}
#endif
