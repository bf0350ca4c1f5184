/* A counter-based generator (doc/nn.md): element i of a stream is
   splitmix64(key + (i + 1) * golden), with key = splitmix64(seed ^ fnv1a(stream)),
   and its top 24 bits make a float in [0, 1).  No state, so every shard of
   a parameter can be filled on its own and equal the unsharded fill. */
#include <math.h>
#include <string.h>

#include "nnimpl.h"

static uint64_t splitmix64(uint64_t z)
{
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

FSDPErrorCode FSDPRandomUniform(uint64_t seed, const char *stream, int64_t begin, int64_t end, double low, double high,
                                float *values)
{
  uint64_t key;
  FSDPCheck(stream, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPRandomUniform: stream must not be NULL");
  FSDPCheck(0 <= begin && begin <= end, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPRandomUniform: stream '%s': range [%lld, %lld) is not a range of elements", stream, (long long)begin,
            (long long)end);
  FSDPCheck(values || begin == end, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPRandomUniform: values must not be NULL");
  FSDPCheck(low <= high, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPRandomUniform: stream '%s': low %g is above high %g", stream,
            low, high);
  key = splitmix64(seed ^ FSDPHashBytes_Private(FSDP_HASH_INIT, stream, strlen(stream)));
  for (int64_t i = begin; i < end; i++) {
    uint64_t bits = splitmix64(key + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull);
    double u = (double)(bits >> 40) * 0x1p-24;
    float v = (float)(low + (high - low) * u);
    if (v >= (float)high && low < high) v = nextafterf((float)high, (float)low); /* [low, high) after rounding too */
    values[i - begin] = v;
  }
  return FSDP_SUCCESS;
}
