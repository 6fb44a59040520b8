// A receive buffer cannot be read while the HCA may still write it: the
// work request owns the memory region until its completion is reclaimed.
use verbs_sys::qp::{QpCaps, QpType, Transition};
use verbs_sys::verbs::{Access, Context};

fn main() -> Result<(), verbs_sys::Error> {
    let ctx = Context::open("mlx5_0")?;
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(16, None)?;
    let mut qp = pd.create_qp(QpType::Rc, &cq, &cq, QpCaps::default())?;
    qp.modify(Transition::Reset)?;
    let mr = pd.register(vec![0u8; 4096].into_boxed_slice(), Access::LOCAL_WRITE)?;
    qp.post_recv(1, mr, 0..4096).unwrap();
    println!("{}", mr.slice()[0]);
    Ok(())
}
