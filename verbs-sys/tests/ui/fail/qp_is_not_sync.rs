// A QP cannot be shared between threads by reference (it is not Sync), so
// no interior path to concurrent posting exists either.
use verbs_sys::qp::Qp;

fn shared<T: Sync>() {}

fn main() {
    shared::<Qp>();
}
