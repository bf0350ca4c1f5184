#!/bin/sh
# plan-matches-view.sh PLAN TRAIN: fsdp-plan's choice in PLAN (its output)
# predicted the memory plan that fsdp-train's -fsdp_view printed in TRAIN,
# category by category.  Used by tests/fsdp-plan.sh and tests/gpu/first-light.sh.
predicted=$(sed -n 's/^    memory per rank: //p' "$1")
for pair in "parameter shards:parameters" "gradient shards:gradients" "unsharded buffers:unsharded buffers" \
  "communication staging:communication staging"; do
  view=${pair%%:*} name=${pair#*:}
  got=$(sed -n "s/^    $view  *\([0-9.]* [KMGT]*i*B\) .*/\1/p" "$2" | head -n 1)
  case "$predicted" in
  *"$name $got,"*) ;;
  *) echo "FAIL: -fsdp_view's $view is '$got'; fsdp-plan predicted: $predicted"; exit 1 ;;
  esac
done
