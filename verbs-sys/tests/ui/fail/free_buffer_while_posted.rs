// A posted buffer cannot be freed: dropping the region it was moved into
// is a use of a moved value.
use verbs_sys::qp::{QpCaps, QpType, SendOp};
use verbs_sys::verbs::{Access, Context};

fn main() -> Result<(), verbs_sys::Error> {
    let ctx = Context::open("mlx5_0")?;
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(16, None)?;
    let mut qp = pd.create_qp(QpType::Rc, &cq, &cq, QpCaps::default())?;
    let mr = pd.register(vec![0u8; 4096].into_boxed_slice(), Access::LOCAL_READ)?;
    qp.post_send(1, mr, 0..64, SendOp::Send { imm: None }).unwrap();
    drop(mr);
    Ok(())
}
