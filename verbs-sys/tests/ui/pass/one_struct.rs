// The whole stack in one struct, in any field order, with no lifetimes;
// children keep their parents alive after the parents' handles are dropped.
use verbs_sys::qp::{Qp, QpCaps, QpType};
use verbs_sys::verbs::{Access, CompChannel, Context, Cq, Mr};

#[allow(dead_code)]
struct Endpoint {
    qp: Qp,
    mrs: Vec<Mr>,
    cq: Cq,
    channel: CompChannel,
}

fn open(name: &str) -> Result<Endpoint, verbs_sys::Error> {
    let ctx = Context::open(name)?;
    let channel = ctx.create_comp_channel()?;
    let cq = ctx.create_cq(16, Some(&channel))?;
    let pd = ctx.alloc_pd()?;
    let qp = pd.create_qp(QpType::Ud, &cq, &cq, QpCaps::default())?;
    let mr = pd.register(vec![0u8; 4096].into_boxed_slice(), Access::LOCAL_WRITE)?;
    drop(pd);
    drop(ctx);
    Ok(Endpoint { qp, mrs: vec![mr], cq, channel })
}

fn assert_send<T: Send>() {}

fn main() {
    assert_send::<Endpoint>();
    // Without a device this is an error, not a crash.
    if let Ok(ep) = open("mlx5_0") {
        assert!(ep.qp.qp_num() > 0);
    }
}
