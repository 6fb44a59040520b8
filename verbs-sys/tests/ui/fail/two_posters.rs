// Two threads cannot post on one QP at once: posting takes &mut Qp.
use verbs_sys::qp::{QpCaps, QpType, SendOp};
use verbs_sys::verbs::{Access, Context};

fn main() -> Result<(), verbs_sys::Error> {
    let ctx = Context::open("mlx5_0")?;
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(16, None)?;
    let mut qp = pd.create_qp(QpType::Rc, &cq, &cq, QpCaps::default())?;
    let a = pd.register(vec![0u8; 64].into_boxed_slice(), Access::LOCAL_READ)?;
    let b = pd.register(vec![0u8; 64].into_boxed_slice(), Access::LOCAL_READ)?;
    std::thread::scope(|s| {
        s.spawn(|| qp.post_send(1, a, 0..64, SendOp::Send { imm: None }));
        s.spawn(|| qp.post_send(2, b, 0..64, SendOp::Send { imm: None }));
    });
    Ok(())
}
