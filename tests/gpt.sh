#!/bin/sh
# fsdp-train's GPT against PyTorch (tests/gpt_reference.py, python3-torch):
# from the same initial parameters and windows of text, 20 AdamW steps with
# clipping give the same loss curve within 1e-4 relative at W = 1, at W = 4
# under full and hybrid sharding, with a tied head on the thread engine with
# both prefetches, and wrapped as one unit or by size; each planned memory
# category peaks at its FSDP formula; activation checkpointing leaves the loss log
# bit-identical; bf16 parameters track fp32 within the mixed-precision
# tolerance; the memory-light (blocked) attention over several blocks of
# keys follows PyTorch and the full attention; token files (flat, llm.c's,
# HDF5) train as the text does;
# -generate gives the same text at any W and after a resume; nanoGPT's
# parameter groups (-no_decay 'ndim<2') match PyTorch's with them; bad input
# is refused with a message naming the value.
. "${srcdir:-.}/tests/testlib.sh"
train="$top_builddir/tools/fsdp-train"
ref="${srcdir:-.}/tests/gpt_reference.py"
fsdp_need_torch

text="$fsdp_tmp/text.txt"
if [ -r /usr/share/common-licenses/GPL-3 ]; then head -c 20000 /usr/share/common-licenses/GPL-3 >"$text"
else head -c 20000 "${srcdir:-.}/README.md" >"$text"; fi
gpt="gpt:vocab=256,ctx=16,dim=32,heads=4,layers=2"
common="-data text:$text -seed 5 -batch 8 -steps 20 -optimizer adamw -lr 0.003 -clip_grad_norm 1.0 -log_every 0"

# ------------------------------------------------------------------ PyTorch's curves
for tied in 0 1; do
  "$python" "$ref" init "$gpt,tied=$tied" 1 "$fsdp_tmp/init$tied.h5" &&
    "$python" "$ref" train "$gpt,tied=$tied" "$fsdp_tmp/init$tied.h5" "$text" 5 8 20 0.003 1.0 "$fsdp_tmp/torch$tied.csv" ||
    { echo "FAIL: the PyTorch reference (tied=$tied)"; exit 1; }
done

train_run w1 1 -model "$gpt" -init "$fsdp_tmp/init0.h5"
curves_agree torch0 w1 20
train_run w4_full 4 -model "$gpt" -init "$fsdp_tmp/init0.h5"
curves_agree torch0 w4_full 20
train_run w4_hybrid 4 -model "$gpt" -init "$fsdp_tmp/init0.h5" -fsdp_sharding_strategy hybrid -fsdp_ranks_per_node 2
curves_agree torch0 w4_hybrid 20
train_run w4_tied 4 -model "$gpt,tied=1" -init "$fsdp_tmp/init1.h5"
curves_agree torch1 w4_tied 20
train_run w2_tied_thread 2 -model "$gpt,tied=1" -init "$fsdp_tmp/init1.h5" -fsdp_comm_engine thread \
  -fsdp_backward_prefetch post -fsdp_forward_prefetch
curves_agree torch1 w2_tied_thread 20

# Other wrappings: the whole model as one unit, and greedy units of 5000 elements.
train_run w2_wrap_model 2 -model "$gpt" -init "$fsdp_tmp/init0.h5" -fsdp_wrap model
curves_agree torch0 w2_wrap_model 20
train_run w2_wrap_size 2 -model "$gpt,tied=1" -init "$fsdp_tmp/init1.h5" -fsdp_wrap size:5000
curves_agree torch1 w2_wrap_size 20

# ------------------------------------------------------------------ nanoGPT's parameter groups
# Weight decay 0.1 on the 2-D weights only (nanoGPT's configure_optimizers, in the
# reference): -no_decay 'ndim<2' gives the same curve and parameters, at W = 4 with
# shards that span a bias and a weight; decaying every parameter does not.
"$python" "$ref" train "$gpt" "$fsdp_tmp/init0.h5" "$text" 5 8 20 0.003 1.0 "$fsdp_tmp/torch_groups.csv" 0.1 nanogpt \
  "$fsdp_tmp/torch_groups.h5" || { echo "FAIL: the PyTorch reference with nanoGPT's groups"; exit 1; }
train_run groups_w1 1 -model "$gpt" -init "$fsdp_tmp/init0.h5" -weight_decay 0.1 -no_decay 'ndim<2' \
  -export "$fsdp_tmp/groups_w1.h5"
curves_agree torch_groups groups_w1 20
train_run groups_w4 4 -model "$gpt" -init "$fsdp_tmp/init0.h5" -weight_decay 0.1 -fsdp_no_decay 'ndim<2' \
  -fsdp_sharding_strategy hybrid -fsdp_ranks_per_node 2 -export "$fsdp_tmp/groups_w4.h5"
curves_agree torch_groups groups_w4 20
train_run decay_all 1 -model "$gpt" -init "$fsdp_tmp/init0.h5" -weight_decay 0.1 -export "$fsdp_tmp/decay_all.h5"
# max |difference| over every parameter: within 1e-4 of PyTorch's (Adam divides by sqrt(v): rounding in a
# near-zero gradient moves a weight by ~1e-5), and LayerNorm's
# weight far from it when every parameter decays.
"$python" - "$fsdp_tmp" <<'PY' || exit 1
import sys, h5py, numpy as np
d = sys.argv[1]
ref = h5py.File(d + "/torch_groups.h5")["params"]
def worst(name):
    got = h5py.File("%s/%s.h5" % (d, name))["params"]
    return max((float(np.max(np.abs(got[k][...] - ref[k][...]))), k) for k in ref)
for name in ("groups_w1", "groups_w4"):
    w, k = worst(name)
    print("%s: parameters within %.2g of PyTorch's with nanoGPT's groups (largest at %s)" % (name, w, k))
    if w > 1e-4: sys.exit("FAIL: %s differs from PyTorch by %g at %s" % (name, w, k))
ln = float(np.max(np.abs(h5py.File(d + "/decay_all.h5")["params/blocks.0.ln_1.weight"][...] - ref["blocks.0.ln_1.weight"][...])))
print("decaying every parameter instead: blocks.0.ln_1.weight differs by %.2g" % ln)
if ln < 1e-3: sys.exit("FAIL: the test cannot tell the groups apart (%g)" % ln)
PY

# The per-rank peak of each planned category is the FSDP formula's, tied head included.
train_run memory 4 -model "$gpt,tied=1" -log_every 20 -fsdp_sharding_strategy hybrid -fsdp_ranks_per_node 2
awk '/psi_i|trainable\/F/ { for (i = 1; i <= NF && $i !~ /^[0-9.]+$/; i++) ;
       n++; if ($i " " $(i + 1) != $(i + 2) " " $(i + 3)) { print "FAIL: peak is not the formula: " $0; bad = 1 } }
     END { if (n != 5) { print "FAIL: " n " formula rows in the summary"; bad = 1 }; exit bad }' "$fsdp_tmp/memory.out" ||
  { cat "$fsdp_tmp/memory.out"; exit 1; }

# ------------------------------------------------------------------ activation checkpointing
train_run w4_hybrid_ckpt 4 -model "$gpt" -init "$fsdp_tmp/init0.h5" -fsdp_sharding_strategy hybrid \
  -fsdp_ranks_per_node 2 -fsdp_activation_checkpointing
cmp "$fsdp_tmp/w4_hybrid.csv" "$fsdp_tmp/w4_hybrid_ckpt.csv" ||
  { echo "FAIL: activation checkpointing changed the loss log"; exit 1; }
train_run view 1 -model "$gpt" -steps 1 -fsdp_view -fsdp_activation_checkpointing
expect_grep "^ *activation checkpointing: on; activations per sequence .* without, .* with (1\.[0-9][0-9]x less)" \
  "$fsdp_tmp/view.out"
expect_grep "^ *unit embed .* embedding\$" "$fsdp_tmp/view.out"

# ------------------------------------------------------------------ memory-light attention
# ctx 160 spans three blocks of keys (64, 64, 32).  The blocked attention
# (auto's choice there) follows PyTorch's curve, and -fsdp_attention full's
# within 1e-6 relative; -fsdp_view gives what each keeps per sequence and
# block; at ctx 16 (one block) auto keeps the probabilities, and
# -fsdp_attention blocked follows PyTorch's curve there too.
long="gpt:vocab=256,ctx=160,dim=32,heads=4,layers=2"
"$python" "$ref" init "$long" 1 "$fsdp_tmp/init_long.h5" &&
  "$python" "$ref" train "$long" "$fsdp_tmp/init_long.h5" "$text" 5 2 10 0.003 1.0 "$fsdp_tmp/torch_long.csv" ||
  { echo "FAIL: the PyTorch reference at ctx 160"; exit 1; }
train_run long_blocked 2 -model "$long" -init "$fsdp_tmp/init_long.h5" -batch 2 -steps 10 -fsdp_view
curves_agree torch_long long_blocked 10
expect_grep "attention: blocked, 64 keys at a time (auto: ctx is more than one block of keys); keeps heads x ctx = 640 floats per sequence and block, where full keeps heads x ctx x ctx = 102400" \
  "$fsdp_tmp/long_blocked.out"
train_run long_full 2 -model "$long" -init "$fsdp_tmp/init_long.h5" -batch 2 -steps 10 -fsdp_attention full -fsdp_view
expect_grep "attention: full (-fsdp_attention); keeps heads x ctx x ctx = 102400 floats per sequence and block" "$fsdp_tmp/long_full.out"
awk -F, 'NR == FNR { if (FNR > 1) want[$1] = $2; next } FNR == 1 { next }
  { n++; d = ($2 - want[$1]) / want[$1]; if (d < 0) d = -d; if (d > worst) worst = d }
  END { if (n != 10 || worst > 1e-6) { print "FAIL: blocked against full attention: " n " steps, largest relative gap " worst; exit 1 }
        printf "blocked attention: the full attention'"'"'s loss curve within %.2g (tolerance 1e-6)\n", worst }' \
  "$fsdp_tmp/long_full.csv" "$fsdp_tmp/long_blocked.csv" || exit 1
expect_grep "attention: full (auto: ctx fits one block of keys)" "$fsdp_tmp/view.out"
train_run short_blocked 2 -model "$gpt" -init "$fsdp_tmp/init0.h5" -fsdp_attention blocked
curves_agree torch0 short_blocked 20
# Activation checkpointing recomputes the blocked attention bit for bit.
train_run long_ckpt 2 -model "$long" -init "$fsdp_tmp/init_long.h5" -batch 2 -steps 10 -fsdp_activation_checkpointing
cmp "$fsdp_tmp/long_blocked.csv" "$fsdp_tmp/long_ckpt.csv" ||
  { echo "FAIL: activation checkpointing changed the blocked attention's loss log"; exit 1; }

# ------------------------------------------------------------------ bf16 parameters
# Within the mixed-precision tolerance of fsdp-train.md (3% of the fp32 loss at
# every step), not equal to fp32 (bf16 was in effect), and checkpointing stays exact.
train_run w4_bf16 4 -model "$gpt,tied=1" -init "$fsdp_tmp/init1.h5" -fsdp_param_dtype bf16
awk -F, 'NR == FNR { if (FNR > 1) want[$1] = $2; next } FNR == 1 { next }
  { n++; d = ($2 - want[$1]) / want[$1]; if (d < 0) d = -d; if (d > worst) worst = d; if (d > 0) differ++ }
  END { if (n != 20 || worst > 0.03 || !differ) { print "FAIL: bf16 against fp32: " n " steps, largest relative gap " worst ", " differ " differ"; exit 1 }
        printf "bf16 tracks fp32 within %.2g (tolerance 0.03)\n", worst }' "$fsdp_tmp/w4_tied.csv" "$fsdp_tmp/w4_bf16.csv" || exit 1
train_run w4_bf16_ckpt 4 -model "$gpt,tied=1" -init "$fsdp_tmp/init1.h5" -fsdp_param_dtype bf16 -fsdp_activation_checkpointing
cmp "$fsdp_tmp/w4_bf16.csv" "$fsdp_tmp/w4_bf16_ckpt.csv" || { echo "FAIL: bf16 with activation checkpointing differs"; exit 1; }

# ------------------------------------------------------------------ token files
"$python" - "$text" "$fsdp_tmp" <<'EOF' || { echo "FAIL: writing the token files"; exit 1; }
import sys, numpy as np, h5py
t = np.frombuffer(open(sys.argv[1], "rb").read(), dtype=np.uint8).astype("<u2")
d = sys.argv[2]
t.tofile(d + "/flat.bin")
header = np.zeros(256, dtype="<i4"); header[0], header[1], header[2] = 20240520, 1, len(t)
with open(d + "/llmc.bin", "wb") as f:
    f.write(header.tobytes()); f.write(t.tobytes())
with h5py.File(d + "/tokens.h5", "w") as f:
    f["tokens"] = t.astype(np.int32)
open(d + "/odd.bin", "wb").write(t.tobytes()[:-1])
big = t.copy(); big[123] = 300; big.tofile(d + "/big.bin")
EOF
train_run text2 2 -model "$gpt"
for f in flat.bin llmc.bin tokens.h5; do
  train_run "tokens_$f" 2 -model "$gpt" -data "tokens:$fsdp_tmp/$f"
  cmp "$fsdp_tmp/text2.csv" "$fsdp_tmp/tokens_$f.csv" || { echo "FAIL: -data tokens:$f trains differently from text"; exit 1; }
done

# ------------------------------------------------------------------ generation
train_run gen_ck 4 -model "$gpt" -checkpoint "$fsdp_tmp/ck.h5"
for w in 1 2; do
  for temp in 0 0.8; do
    fsdp_run "$w" "$train" -model "$gpt" $common -resume "$fsdp_tmp/ck.h5" -generate 40 -prompt "The " \
      -temperature "$temp" >"$fsdp_tmp/gen_${w}_$temp.out" 2>&1 ||
      { cat "$fsdp_tmp/gen_${w}_$temp.out"; echo "FAIL: -generate at W = $w, temperature $temp"; exit 1; }
    sed -n '/tokens.*after the prompt:$/,$p' "$fsdp_tmp/gen_${w}_$temp.out" >"$fsdp_tmp/sample_${w}_$temp"
    [ "$(wc -l <"$fsdp_tmp/sample_${w}_$temp")" -ge 2 ] || { echo "FAIL: no sample at W = $w"; exit 1; }
  done
  cmp "$fsdp_tmp/sample_${w}_0" "$fsdp_tmp/sample_${w}_0.8" >/dev/null &&
    { echo "FAIL: sampling at temperature 0.8 gave the most likely tokens"; exit 1; }
done
for temp in 0 0.8; do
  cmp "$fsdp_tmp/sample_1_$temp" "$fsdp_tmp/sample_2_$temp" ||
    { echo "FAIL: -generate at temperature $temp differs between W = 1 and W = 2"; exit 1; }
done

# With token data the prompt is token ids, and so is the output.
fsdp_run 2 "$train" -model "$gpt" $common -data "tokens:$fsdp_tmp/flat.bin" -steps 2 -generate 5 \
  -prompt "84 104 101" >"$fsdp_tmp/gen_ids.out" 2>&1 || { cat "$fsdp_tmp/gen_ids.out"; echo "FAIL: token-id prompt"; exit 1; }
expect_grep '^84 104 101\( [0-9]*\)\{5\}$' "$fsdp_tmp/gen_ids.out"

# ------------------------------------------------------------------ bad input
refuse() { # refuse NAME TEXT ARGS...: fsdp-train fails and says TEXT
  name=$1 want=$2
  shift 2
  rc=0
  fsdp_run 2 "$train" $common "$@" >"$fsdp_tmp/$name.out" 2>&1 || rc=$?
  [ $rc -ne 0 ] || { echo "FAIL: $name was accepted"; exit 1; }
  expect_grep "$want" "$fsdp_tmp/$name.out"
}
refuse heads "heads=3 does not divide dim=32" -model "gpt:vocab=256,ctx=16,dim=32,heads=3,layers=2"
refuse zero "layers=0 is not a positive integer" -model "gpt:vocab=256,ctx=16,dim=32,heads=4,layers=0"
head -c 10 "$text" >"$fsdp_tmp/short.txt"
refuse short "10 tokens are fewer than one window of ctx + 1 = 17" -model "$gpt" -data "text:$fsdp_tmp/short.txt"
refuse vocab "is not below the model's vocab=64" -model "gpt:vocab=64,ctx=16,dim=32,heads=4,layers=2"
refuse big "token 300 at position 123 is not below the model's vocab=256" -model "$gpt" -data "tokens:$fsdp_tmp/big.bin"
refuse odd "odd number of bytes" -model "$gpt" -data "tokens:$fsdp_tmp/odd.bin"
refuse synthetic "a gpt: model trains on token data" -model "$gpt" -data synthetic
refuse prompt_ids "with -data tokens: it is token ids separated by spaces, each in \[0, 256); 'x' is not one" \
  -model "$gpt" -data "tokens:$fsdp_tmp/flat.bin" -generate 3 -prompt "84 x"
refuse overwrite "-loss_log '$text' would overwrite the -data file" -model "$gpt" -loss_log "$text"
refuse mlp_text "token data needs a gpt: model" -model "mlp:in=4,hidden=8,depth=1,out=2" -data "text:$text"
refuse mlp_gen "needs a gpt: model" -model "mlp:in=4,hidden=8,depth=1,out=2" -data synthetic -generate 5
echo "GPT: PyTorch's loss curves at W = 1, 4 (full, hybrid, tied); checkpointing bit-identical; token files; generation; refusals"
exit 0
