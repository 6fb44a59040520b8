// A completion cannot be forged to reclaim a buffer early: only Cq::poll
// makes one.
use verbs_sys::verbs::Completion;

fn main() {
    let _c = Completion {
        wr_id: 1,
        status: 0,
        opcode: 0,
        byte_len: 0,
        qp_num: 1,
        src_qp: 0,
        slid: 0,
        imm: None,
    };
}
