// Registration takes the buffer: the caller's Vec cannot be written (or
// freed, or grown and moved) behind the HCA's back.
use verbs_sys::verbs::{Access, Context};

fn main() -> Result<(), verbs_sys::Error> {
    let ctx = Context::open("mlx5_0")?;
    let pd = ctx.alloc_pd()?;
    let mut buf = vec![0u8; 4096].into_boxed_slice();
    let _mr = pd.register(buf, Access::LOCAL_WRITE)?;
    buf[0] = 1;
    Ok(())
}
