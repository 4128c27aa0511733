//! Code mode: programs that call tools, run in sandboxed `toolgate worker` processes kept warm by a pool.

pub mod pool;
pub mod sandbox;
pub mod wire;
pub mod worker;
