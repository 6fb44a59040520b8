//! SMInfo (0x0020): a subnet manager's identity, priority and state.

use crate::types::{Guid, MKey};

enum_with_unknown! {
    /// SMInfo.SMState.
    pub enum SmState(u8) {
        /// Not active.
        NotActive = 0,
        /// Discovering.
        Discovering = 1,
        /// Standby.
        Standby = 2,
        /// Master.
        Master = 3,
    }
}

bitstruct! {
    /// SMInfo (21 bytes).
    pub struct SmInfo("SMInfo", 21) {
        /// Port GUID of the SM.
        guid: Guid = 0, 64;
        /// SM_Key (zero unless the requester is authenticated).
        sm_key: MKey = 64, 64;
        /// Heartbeat counter.
        act_count: u32 = 128, 32;
        /// Priority.
        priority: u8 = 160, 4;
        /// State.
        sm_state: SmState = 164, 4;
    }
}
