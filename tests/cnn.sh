#!/bin/sh
# fsdp-train's convolutional models against PyTorch (tests/cnn_reference.py,
# python3-torch): from the same initial parameters and the same rows of an
# HDF5 grid data set (/x [N, C, grid...]), 20 AdamW steps with clipping give
# the same loss curve within 1e-4 relative, and the trained parameters match
# by name, for TorchFort's one-layer circular convolution (W = 1 and W = 4
# hybrid, 2 emulated nodes), a SmartSim-style residual network of Conv2d and
# ConvTranspose2d written as a model file (W = 1 and W = 4 hybrid), a 2-D
# network with groups, dilation, reflection, GroupNorm, GELU and residual
# additions (W = 4), a strided 1-D one (W = 2), a 3-D circular one (W = 4
# hybrid), a 2-D U-Net of 2 levels with GroupNorm (W = 1 and W = 4 hybrid), a
# 1-D one of 3 levels with average pooling and circular padding (W = 2), and
# Fourier neural operators of 2 layers on a 2-D grid (W = 1 and W = 4 hybrid)
# and a 1-D odd one (W = 2), the latter also written as a model file. The
# 2-D networks train with activation checkpointing at W = 4 (bit for bit as
# without it: test_nn_conv), and -fsdp_view says what it saves.
# A checkpoint of the residual network written at W = 4 after 10 steps
# continues in PyTorch (parameters, AdamW's state and hyperparameters, by
# name) to the same 10 further losses and parameters as the uninterrupted run.
# A data file whose shape is not the model's is refused by name.
. "${srcdir:-.}/tests/testlib.sh"
train="$top_builddir/tools/fsdp-train"
ref="${srcdir:-.}/tests/cnn_reference.py"
fsdp_need_torch
common="-seed 5 -batch 8 -steps 20 -optimizer adamw -lr 0.01 -clip_grad_norm 1.0 -log_every 0"
hybrid="-fsdp_sharding_strategy hybrid -fsdp_ranks_per_node 2"

torchfort="cnn:grid=32x32,in=1,out=1,padding=circular"
net2d="cnn:grid=16x12,in=2,out=2,depth=3,channels=8,groups=2,dilation=2,padding=reflect,norm=groupnorm:4,act=gelu,\
residual=1"
net1d="cnn:grid=40,in=3,out=1,depth=2,channels=6,kernel=5,stride=2,act=tanh"
net3d="cnn:grid=6x5x4,in=1,out=2,depth=1,channels=4,padding=circular"
unet2d="unet:grid=16x8,in=2,out=1,channels=4,levels=2,norm=groupnorm:2,act=gelu"
unet1d="unet:grid=32,in=1,out=1,channels=4,levels=3,pool=avg,padding=circular,act=tanh"
fno2d="fno:grid=16x12,in=2,out=1,width=6,modes=4,layers=2"
fno1d="fno:grid=31,in=1,out=2,width=4,modes=16,layers=2,act=tanh"
# PyTorch's side of a model file (tests/cnn_reference.py's ResNet); fsdp-train reads $fsdp_tmp/resnet.model.
resnet="resnet:grid=32x32,in=1,out=1,channels=8,blocks=2"
models="torchfort resnet net2d net1d net3d unet2d unet1d"
if [ "$(fsdp_config_has FFTW)" = yes ]; then
  models="$models fno2d fno1d"
else
  echo "no FNO here: this build has no FFTW (test_nn_conv checks the refusal)"
fi

# PyTorch's initial parameters, data, loss curve and final parameters for every model, in one process
# (importing torch takes seconds): $fsdp_tmp/NAME-init.h5, -data.h5, -torch.csv, -torch.h5.
set --
for m in $models; do
  eval "set -- \"\$@\" \"\$$m\" \"$fsdp_tmp/$m\""
done
"$python" "$ref" all 3 64 8 20 0.01 1.0 "$@" || { echo "FAIL: the PyTorch references"; exit 1; }

# same NAME RUN NP ARGS...: fsdp-train at NP ranks gives PyTorch's curve for model NAME (its parameters are
# compared below); -model is NAME's spec, or $model_file when set.
same() {
  m=$1 run=$2 np=$3
  shift 3
  eval "spec=\$$m"
  train_run "$run" "$np" -model "${model_file:-$spec}" -init "$fsdp_tmp/$m-init.h5" -data "$fsdp_tmp/$m-data.h5" \
    -export "$fsdp_tmp/$run.h5" "$@"
  curves_agree "$m-torch" "$run" 20
}

same torchfort torchfort_w1 1
same torchfort torchfort_w4 4 $hybrid
# The SmartSim-style network: names and shapes are those of ResNet's state_dict.
cat >"$fsdp_tmp/resnet.model" <<'EOF'
input channels=1 grid=32x32
unit encoder
conv name=encoder out=8 kernel=3 stride=2 pad=1    # 32x32 -> 16x16
act name=encoder.relu fn=relu
unit blocks.0
conv name=blocks.0.conv1 out=8
act fn=relu
conv name=blocks.0.conv2 out=8
add from=encoder.relu
act name=blocks.0.out fn=relu
unit blocks.1
conv name=blocks.1.conv1 out=8
act fn=relu
conv name=blocks.1.conv2 out=8
add from=blocks.0.out
act fn=relu
unit decoder
convtranspose name=decoder out=8 kernel=2 stride=2 # 16x16 -> 32x32
act fn=relu
unit root
conv name=head out=1 kernel=1
EOF
# (model_file set for these calls alone: a shell may keep an assignment before a function call.)
model_file="file:$fsdp_tmp/resnet.model"
same resnet resnet_w1 1
same resnet resnet_w4 4 $hybrid -fsdp_activation_checkpointing
unset model_file
same net2d net2d_w4 4 -fsdp_activation_checkpointing
same net1d net1d_w2 2
same net3d net3d_w4 4 $hybrid
same unet2d unet2d_w1 1
same unet2d unet2d_w4 4 $hybrid -fsdp_activation_checkpointing -fsdp_view
expect_grep "^ *activation checkpointing: on; activations per sample .* without, .* with (1\.[0-9][0-9]x less)" \
  "$fsdp_tmp/unet2d_w4.out"
# fsdp-train's summary: the peak of the rest is its formula, activations as FSDPModelGetActivationBytes says
# (with checkpointing; no -export, whose table of datasets would come on top).
train_run unet2d_memory 4 -model "$unet2d" -data "$fsdp_tmp/unet2d-data.h5" $hybrid -fsdp_activation_checkpointing \
  -steps 2 -log_every 2
summary_is_formula "$fsdp_tmp/unet2d_memory.out"
same unet1d unet1d_w2 2
case " $models " in
*" fno1d "*)
  same fno2d fno2d_w1 1
  same fno2d fno2d_w4 4 $hybrid
  # the spectral layers' scratch (the batch's kept modes) in the formula too
  train_run fno2d_memory 4 -model "$fno2d" -data "$fsdp_tmp/fno2d-data.h5" $hybrid -steps 2 -log_every 2
  summary_is_formula "$fsdp_tmp/fno2d_memory.out"
  same fno1d fno1d_w2 2
  # The same FNO as a model file, a layer per line: PyTorch's curve and parameters too.
  cat >"$fsdp_tmp/fno1d.model" <<'EOF'
# fno:grid=31,in=1,out=2,width=4,modes=16,layers=2,act=tanh
input channels=1 grid=31
unit lift
conv name=lift out=4 kernel=1
unit blocks.0
spectral name=blocks.0.spectral modes=16
conv name=blocks.0.w out=4 kernel=1 input=lift
add from=blocks.0.spectral
act name=blocks.0.act fn=tanh
unit blocks.1
spectral name=blocks.1.spectral modes=16
conv name=blocks.1.w out=4 kernel=1 input=blocks.0.act
add from=blocks.1.spectral
unit root
conv name=head out=2 kernel=1
EOF
  model_file="file:$fsdp_tmp/fno1d.model"
  same fno1d fno1d_wfile2 2
  unset model_file
  ;;
esac
# The trained parameters, by name and shape: PyTorch's within 1e-4.
set --
for m in $models; do
  [ $# -eq 0 ] || set -- "$@" --
  set -- "$@" "$fsdp_tmp/$m-torch.h5" "$fsdp_tmp/$m"_w*.h5
done
"$python" "$ref" compare "$@" || exit 1

# A checkpoint to PyTorch: the residual network's, written at W = 4 hybrid after 10 of the 20 steps
# (each rank its shards), continues in PyTorch to resnet_w4's losses and parameters.
train_run resnet_ck 4 -model "file:$fsdp_tmp/resnet.model" -init "$fsdp_tmp/resnet-init.h5" \
  -data "$fsdp_tmp/resnet-data.h5" $hybrid -steps 10 -checkpoint "$fsdp_tmp/resnet-ck.h5"
"$python" "$ref" resume "$resnet" "$fsdp_tmp/resnet-ck.h5" "$fsdp_tmp/resnet-data.h5" 8 20 \
  "$fsdp_tmp/resnet_w4.csv" "$fsdp_tmp/resnet-resumed.csv" "$fsdp_tmp/resnet-resumed.h5" || exit 1
"$python" "$ref" compare "$fsdp_tmp/resnet_w4.h5" "$fsdp_tmp/resnet-resumed.h5" || exit 1

# A data file for another grid: refused, naming both shapes.
if fsdp_run 2 "$train" -model "cnn:grid=16x16,in=2,out=2,depth=3,channels=8" -data "$fsdp_tmp/net2d-data.h5" \
  -steps 1 >"$fsdp_tmp/shape.out" 2>&1; then
  cat "$fsdp_tmp/shape.out"; echo "FAIL: a 16x12 data set trained a 16x16 model"; exit 1
fi
expect_count 2 "/x must be float \[N, 2, 16, 16\] (or \[N, 512\]) for a model with in=512, not float \[64, 2, 16, 12\]" \
  "$fsdp_tmp/shape.out"
echo "a data file of another grid is refused on every rank, naming both shapes"
