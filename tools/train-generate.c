/* fsdp-train -generate: tokens sampled from a trained GPT after -prompt. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"
#if FSDP_WITH_CUDA
#include <cuda_runtime.h>
#endif

/* The next token after window[0 .. len) (len <= ctx): the model's logits at
   position len - 1 (causal: the padding after it changes nothing), the most
   likely token or a sample at `temperature` from uniform u.  On a GPU the
   logits are device memory: that position's are copied into host[vocab]. */
static FSDPErrorCode next_token(Run *r, const float *window, int64_t len, double temperature, float u, float *host,
                                int64_t *token)
{
  int64_t ctx, vocab;
  float *logits, *z;
  FSDPDeviceType device;
  FSDPCall(FSDPModelGetTokens(r->model, &ctx, &vocab));
  memcpy(r->x, window, (size_t)len * sizeof *r->x);
  for (int64_t t = len; t < ctx; t++) r->x[t] = 0.0f;
  FSDPCall(FSDPModelForward(r->model, 1, r->x, &logits));
  z = logits + (len - 1) * vocab;
  FSDPCall(FSDPContextGetDevice(r->ctx, &device));
  if (device == FSDP_DEVICE_CUDA) {
#if FSDP_WITH_CUDA
    /* (The legacy default stream waits for the context's blocking streams.) */
    cudaError_t e = cudaMemcpy(host, z, (size_t)vocab * sizeof *host, cudaMemcpyDeviceToHost);
    FSDPCheck(e == cudaSuccess, MPI_COMM_SELF, FSDP_ERR_CUDA, "fsdp-train -generate: copying the logits: %s",
              cudaGetErrorString(e));
#endif
    z = host;
  }
  *token = 0;
  for (int64_t v = 1; v < vocab; v++)
    if (z[v] > z[*token]) *token = v;
  if (temperature > 0) { /* inverse CDF of softmax(z / T), from the largest term down: no overflow */
    double sum = 0, acc = 0, zmax = z[*token];
    for (int64_t v = 0; v < vocab; v++) sum += exp((z[v] - zmax) / temperature);
    for (int64_t v = 0; v < vocab; v++) {
      acc += exp((z[v] - zmax) / temperature) / sum;
      if (u < acc || v == vocab - 1) {
        *token = v;
        break;
      }
    }
  }
  return FSDP_SUCCESS;
}

/* -prompt as tokens: its bytes for a model trained on text:, else token ids
   separated by spaces; an error names what is not a token.  Pre-flight
   (check_generate) calls it too, so that a bad prompt stops the job before
   its first step. */
FSDPErrorCode prompt_tokens(const char *prompt, bool text, int64_t vocab, float *tokens, int64_t *n)
{
  *n = 0;
  for (const char *c = prompt; text && *c; c++) {
    FSDPCheck((unsigned char)*c < vocab, MPI_COMM_SELF, FSDP_ERR_OPTION,
              "fsdp-train: -prompt: character %lld (byte %d) is not a token of the model's vocab=%lld",
              (long long)(c - prompt), (unsigned char)*c, (long long)vocab);
    tokens[(*n)++] = (unsigned char)*c;
  }
  if (text) return FSDP_SUCCESS;
  for (const char *c = prompt; *c;) {
    char *end;
    long long id;
    while (*c == ' ') c++;
    if (!*c) break;
    errno = 0;
    id = strtoll(c, &end, 10);
    FSDPCheck(end != c && (*end == ' ' || !*end) && !errno && id >= 0 && id < vocab, MPI_COMM_SELF, FSDP_ERR_OPTION,
              "fsdp-train: -prompt '%s': with -data tokens: it is token ids separated by spaces, each in [0, %lld); "
              "'%.20s' is not one",
              prompt, (long long)vocab, c);
    tokens[(*n)++] = (float)id;
    c = end;
  }
  return FSDP_SUCCESS;
}

/* Collective: -generate tokens after -prompt; rank 0 prints them.  Every rank
   computes the same logits; rank 0's choice is the one all take.  The window
   holds the last ctx tokens (a prompt's first ones fall out as well). */
FSDPErrorCode generate(Run *r, const Args *a)
{
  int64_t ctx, vocab, len = 0, plen = (int64_t)strlen(a->prompt);
  float *window, *host, u = 0;
  FSDPCall(FSDPModelGetTokens(r->model, &ctx, &vocab));
  FSDPCheck(ctx > 0, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -generate %lld needs a gpt: model, not %s",
            (long long)a->generate, a->model);
  FSDPCall(FSDPMalloc((size_t)(plen > ctx ? plen : ctx) * sizeof *window, FSDP_MEM_OTHER, &window));
  FSDPCall(FSDPMalloc((size_t)vocab * sizeof *host, FSDP_MEM_OTHER, &host));
  FSDPCall(prompt_tokens(a->prompt, r->data.text, vocab, window, &len));
  FSDPCheck(len > 0, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -prompt '%s' holds no token", a->prompt);
  if (len > ctx) { /* the model sees its last ctx tokens */
    memmove(window, window + len - ctx, (size_t)ctx * sizeof *window);
    len = ctx;
  }
  if (r->rank == 0) {
    if (a->temperature > 0)
      printf("fsdp-train: %lld tokens sampled at temperature %g (seed %lld) after the prompt:\n",
             (long long)a->generate, a->temperature, (long long)a->seed);
    else printf("fsdp-train: %lld tokens, the most likely each time, after the prompt:\n", (long long)a->generate);
    fputs(a->prompt, stdout);
  }
  for (int64_t n = 0; n < a->generate; n++) {
    int64_t token;
    if (a->temperature > 0) FSDPCall(FSDPRandomUniform((uint64_t)a->seed, "generate", n, n + 1, 0.0, 1.0, &u));
    FSDPCall(next_token(r, window, len, a->temperature, u, host, &token));
    FSDPCallMPI(MPI_Bcast(&token, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
    if (len == ctx) memmove(window, window + 1, (size_t)(ctx - 1) * sizeof *window);
    else len++;
    window[len - 1] = (float)token;
    if (r->rank == 0) { /* bytes as text, escaped where they would not print; other tokens as numbers */
      if (!r->data.text) printf(" %lld", (long long)token);
      else if ((token >= 32 && token < 127) || token == '\n' || token == '\t') putchar((int)token);
      else printf("\\x%02x", (unsigned)token);
    }
  }
  if (r->rank == 0) {
    printf("\n");
    fflush(stdout);
  }
  FSDPCall(FSDPFree(&host));
  FSDPCall(FSDPFree(&window));
  return FSDP_SUCCESS;
}
