#!/usr/bin/env bash
# Regenerates verbs-sys's checked-in bindings from rdma-core's headers with
# bindgen (`cargo install bindgen-cli`; needs libclang and Debian's
# libibverbs-dev and libibumad-dev). The functions become fields of a struct
# loaded at run time (bindgen --dynamic-loading), so nothing links against
# rdma-core at build time.
#
#   verbs-sys/regen.sh            rewrite src/bindings/*.rs
#   verbs-sys/regen.sh --check    fail if they differ from what is checked in
set -euo pipefail
cd "$(dirname "$0")"
out=src/bindings
check=0
if [ "${1:-}" = "--check" ]; then
    check=1
    out=$(mktemp -d)
fi
common=(--no-doc-comments --no-layout-tests --use-core --default-enum-style=consts
        --with-derive-default --rust-target 1.82)
bindgen /usr/include/infiniband/verbs.h "${common[@]}" \
    --dynamic-loading IbVerbsLib \
    --allowlist-function 'ibv_(get_device_list|free_device_list|get_device_name|get_device_guid|open_device|close_device|query_device|query_port|query_gid|query_pkey|alloc_pd|dealloc_pd|reg_mr|reg_mr_iova|dereg_mr|create_comp_channel|destroy_comp_channel|create_cq|destroy_cq|get_cq_event|ack_cq_events|create_qp|modify_qp|query_qp|destroy_qp|create_ah|destroy_ah|wc_status_str|port_state_str|get_async_event|ack_async_event|event_type_str)' \
    --allowlist-type 'ibv_.*' --allowlist-var 'IBV_.*' \
    -o "$out/verbs.rs" -- -I/usr/include
bindgen /usr/include/infiniband/umad.h "${common[@]}" \
    --dynamic-loading UmadLib \
    --allowlist-function 'umad_.*' --allowlist-type 'umad_.*|ib_user_mad.*|ib_mad_addr' \
    --allowlist-var 'UMAD_.*' \
    -o "$out/umad.rs" -- -I/usr/include
bindgen /usr/include/infiniband/umad_types.h "${common[@]}" \
    --allowlist-type 'umad_.*' --allowlist-var 'UMAD_.*' \
    -o "$out/umad_types.rs" -- -I/usr/include
if [ $check = 1 ]; then
    for f in verbs umad umad_types; do
        diff -u "src/bindings/$f.rs" "$out/$f.rs" >/dev/null || {
            echo "verbs-sys: src/bindings/$f.rs differs from rdma-core's headers; run verbs-sys/regen.sh" >&2
            diff -u "src/bindings/$f.rs" "$out/$f.rs" | head -40 >&2
            exit 1
        }
    done
    echo "verbs-sys: bindings match the headers"
fi
