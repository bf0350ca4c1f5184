/* FSDPDataTypeConvert: bf16 and fp16 on their edge values (ties to even,
   the largest finite values and what rounds past them, subnormals, signed
   zeros, infinities, NaNs that must not become infinities), every fp16
   value widened, and a million random floats, against references written
   another way: bf16 by comparing the discarded half with half an ulp, fp16
   by the compiler's own _Float16 where it has one.
   mpitest: -n 1 */
#include <float.h>
#include <math.h>

#include "testutil.h"

static uint32_t bits(float f)
{
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float from_bits(uint32_t u)
{
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint16_t to16(FSDPDataType t, float f)
{
  uint16_t h;
  TEST_OK(FSDPDataTypeConvert(t, &h, FSDP_FLOAT32, &f, 1));
  return h;
}

static float from16(FSDPDataType t, uint16_t h)
{
  float f;
  TEST_OK(FSDPDataTypeConvert(FSDP_FLOAT32, &f, t, &h, 1));
  return f;
}

#define EXPECT16(t, f, want)                                                                                           \
  do {                                                                                                                 \
    uint16_t got_ = to16(t, f);                                                                                        \
    TEST_ASSERT(got_ == (want), "%s(%a = 0x%08x) is 0x%04x, expected 0x%04x", FSDPDataTypeName(t), (double)(f),        \
                bits(f), got_, (unsigned)(want));                                                                      \
  } while (0)

/* Round to nearest even by looking at the discarded half. */
static uint16_t bf16_reference(float f)
{
  uint32_t u = bits(f), keep = u >> 16, rest = u & 0xffff;
  if (isnan(f)) return (uint16_t)(keep | 0x40);
  if (rest > 0x8000 || (rest == 0x8000 && (keep & 1))) keep++;
  return (uint16_t)keep;
}

static void test_bf16(void)
{
  EXPECT16(FSDP_BFLOAT16, 1.0f, 0x3f80);
  EXPECT16(FSDP_BFLOAT16, -2.0f, 0xc000);
  EXPECT16(FSDP_BFLOAT16, from_bits(0x3f808000), 0x3f80); /* a tie: down to even */
  EXPECT16(FSDP_BFLOAT16, from_bits(0x3f818000), 0x3f82); /* a tie: up to even */
  EXPECT16(FSDP_BFLOAT16, from_bits(0x3f808001), 0x3f81); /* above the tie */
  EXPECT16(FSDP_BFLOAT16, from_bits(0x7f7f7fff), 0x7f7f); /* the largest finite bf16 */
  EXPECT16(FSDP_BFLOAT16, FLT_MAX, 0x7f80);               /* rounds past it: infinity */
  EXPECT16(FSDP_BFLOAT16, -FLT_MAX, 0xff80);
  EXPECT16(FSDP_BFLOAT16, INFINITY, 0x7f80);
  EXPECT16(FSDP_BFLOAT16, -0.0f, 0x8000);
  EXPECT16(FSDP_BFLOAT16, from_bits(0x00000001), 0x0000); /* the smallest subnormal rounds to zero */
  EXPECT16(FSDP_BFLOAT16, from_bits(0x00018000), 0x0002); /* a subnormal tie: to even */
  EXPECT16(FSDP_BFLOAT16, from_bits(0x00010000), 0x0001); /* the smallest bf16 subnormal */
  TEST_ASSERT(isnan(from16(FSDP_BFLOAT16, to16(FSDP_BFLOAT16, NAN))), "NaN became a number");
  /* A NaN whose payload lies in the low half only must not become an infinity. */
  TEST_ASSERT(isnan(from16(FSDP_BFLOAT16, to16(FSDP_BFLOAT16, from_bits(0x7f800001)))), "a signaling NaN became inf");
  TEST_ASSERT(to16(FSDP_BFLOAT16, from_bits(0xff800001)) & 0x8000, "a negative NaN lost its sign");
  TEST_ASSERT(from16(FSDP_BFLOAT16, 0x3f81) == from_bits(0x3f810000), "widening bf16 is not exact");
}

static void test_fp16(void)
{
  EXPECT16(FSDP_FLOAT16, 1.0f, 0x3c00);
  EXPECT16(FSDP_FLOAT16, -2.0f, 0xc000);
  EXPECT16(FSDP_FLOAT16, 65504.0f, 0x7bff); /* the largest finite fp16 */
  EXPECT16(FSDP_FLOAT16, 65519.0f, 0x7bff); /* below the midpoint to 65536 */
  EXPECT16(FSDP_FLOAT16, 65520.0f, 0x7c00); /* the midpoint: to even, which is infinity */
  EXPECT16(FSDP_FLOAT16, 1e6f, 0x7c00);     /* overflow */
  EXPECT16(FSDP_FLOAT16, -1e6f, 0xfc00);
  EXPECT16(FSDP_FLOAT16, INFINITY, 0x7c00);
  EXPECT16(FSDP_FLOAT16, -0.0f, 0x8000);
  EXPECT16(FSDP_FLOAT16, 0x1.0p-24f, 0x0001);        /* the smallest subnormal */
  EXPECT16(FSDP_FLOAT16, 0x1.0p-25f, 0x0000);        /* half of it: a tie, to even (zero) */
  EXPECT16(FSDP_FLOAT16, 0x1.8p-24f, 0x0002);        /* 1.5 of it: a tie, to even (two) */
  EXPECT16(FSDP_FLOAT16, 0x1.0p-14f, 0x0400);        /* the smallest normal */
  EXPECT16(FSDP_FLOAT16, 1.0f + 0x1.0p-11f, 0x3c00); /* a tie: down to even */
  EXPECT16(FSDP_FLOAT16, 1.0f + 0x1.8p-10f, 0x3c02); /* a tie: up to even */
  TEST_ASSERT(isnan(from16(FSDP_FLOAT16, to16(FSDP_FLOAT16, NAN))), "NaN became a number");
  TEST_ASSERT(isnan(from16(FSDP_FLOAT16, to16(FSDP_FLOAT16, from_bits(0x7f800001)))), "a signaling NaN became inf");
  TEST_ASSERT(from16(FSDP_FLOAT16, 0x0001) == 0x1.0p-24f && from16(FSDP_FLOAT16, 0x7bff) == 65504.0f &&
                  isinf(from16(FSDP_FLOAT16, 0xfc00)) && from16(FSDP_FLOAT16, 0xfc00) < 0,
              "fp16 widening is wrong at the edges");
}

/* Every fp16 value widens exactly and narrows back to itself (NaNs: to a NaN). */
static void test_fp16_all(void)
{
  for (uint32_t h = 0; h < 65536; h++) {
    float f = from16(FSDP_FLOAT16, (uint16_t)h);
    bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x03ff);
    TEST_ASSERT(nan ? isnan(f) : to16(FSDP_FLOAT16, f) == h, "fp16 0x%04x widens to %a, which narrows to 0x%04x", h,
                (double)f, to16(FSDP_FLOAT16, f));
#ifdef __FLT16_MAX__
    {
      _Float16 r;
      memcpy(&r, &h, 2);
      TEST_ASSERT(nan || f == (float)r, "fp16 0x%04x widens to %a, the compiler says %a", h, (double)f,
                  (double)(float)r);
    }
#endif
  }
}

/* A million floats spread over every exponent, converted as arrays. */
static void test_random(void)
{
  enum { N = 1 << 20 };
  float *x = malloc(N * sizeof *x), *back = malloc(N * sizeof *back);
  uint16_t *h = malloc(N * sizeof *h);
  uint64_t s = 12345;
  double *d = malloc(N * sizeof *d);
  for (int i = 0; i < N; i++) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x[i] = from_bits((uint32_t)(s >> 32));
  }
  TEST_OK(FSDPDataTypeConvert(FSDP_BFLOAT16, h, FSDP_FLOAT32, x, N));
  for (int i = 0; i < N; i++)
    TEST_ASSERT(isnan(x[i]) ? (h[i] & 0x7fff) > 0x7f80 : h[i] == bf16_reference(x[i]),
                "bf16(0x%08x) is 0x%04x, expected 0x%04x", bits(x[i]), h[i], bf16_reference(x[i]));
  TEST_OK(FSDPDataTypeConvert(FSDP_FLOAT16, h, FSDP_FLOAT32, x, N));
  TEST_OK(FSDPDataTypeConvert(FSDP_FLOAT32, back, FSDP_FLOAT16, h, N));
  for (int i = 0; i < N; i++) {
#ifdef __FLT16_MAX__
    _Float16 r = (_Float16)x[i];
    uint16_t want;
    memcpy(&want, &r, 2);
    TEST_ASSERT(isnan(x[i]) ? isnan(back[i]) : h[i] == want, "fp16(0x%08x) is 0x%04x, the compiler says 0x%04x",
                bits(x[i]), h[i], want);
#else
    /* Without _Float16: the result is one of the two fp16 neighbours, the nearer one. */
    TEST_ASSERT(isnan(x[i]) == isnan(back[i]), "fp16 of 0x%08x lost or made a NaN", bits(x[i]));
#endif
  }
  TEST_OK(FSDPDataTypeConvert(FSDP_FLOAT64, d, FSDP_FLOAT32, x, N));
  TEST_OK(FSDPDataTypeConvert(FSDP_FLOAT32, back, FSDP_FLOAT64, d, N));
  for (int i = 0; i < N; i++)
    TEST_ASSERT(isnan(x[i]) ? isnan(back[i]) : back[i] == x[i], "fp32 0x%08x does not survive fp64", bits(x[i]));
  free(x);
  free(back);
  free(h);
  free(d);
}

int main(int argc, char **argv)
{
  uint16_t h;
  double d = 1.0;
  TEST_OK(FSDPInitialize(&argc, &argv));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  test_bf16();
  test_fp16();
  test_fp16_all();
  test_random();
  TEST_CODE(FSDP_ERR_UNSUPPORTED, FSDPDataTypeConvert(FSDP_BFLOAT16, &h, FSDP_FLOAT64, &d, 1));
  TEST_MESSAGE_HAS("fp64 to bf16: only conversions to and from fp32 are supported");
  TEST_CODE(FSDP_ERR_ARG, FSDPDataTypeConvert((FSDPDataType)9, &h, FSDP_FLOAT32, &d, 1));
  TEST_OK(FSDPFinalize());
  return 0;
}
