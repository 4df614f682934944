//! The client agent (`XSCHED_SCHEDULER=global`) against daemons that misbehave, played by this
//! test: one that falls silent with a queue suspended, and one that refuses every client.

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use xsched_backend_cpu::{CpuCommand, CpuDevice};
use xsched_proto::{ClientMsg, DaemonMsg, VERSION, read_frame, write_frame};
use xsched_runtime::{QueueOptions, Runtime, RuntimeConfig, WhoSchedules};

fn socket(name: &str) -> (UnixListener, PathBuf) {
    let path =
        std::env::temp_dir().join(format!("xsched-agent-{}-{name}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    (UnixListener::bind(&path).expect("bind"), path)
}

fn global(path: &std::path::Path) -> Runtime {
    Runtime::new(RuntimeConfig {
        scheduler: WhoSchedules::Global,
        socket: Some(path.to_path_buf()),
        ..RuntimeConfig::default()
    })
    .expect("runtime")
}

/// Accept one client and welcome it; its hello is checked.
fn welcome(listener: &UnixListener) -> UnixStream {
    let (mut s, _) = listener.accept().expect("accept");
    let hello = read_frame::<ClientMsg>(&mut s).expect("hello");
    assert_eq!(hello, Some(ClientMsg::Hello { version: VERSION }));
    write_frame(&mut s, &DaemonMsg::Welcome { version: VERSION }).expect("welcome");
    s
}

/// Read frames until a `Register`; returns its queue.
fn registered(s: &mut UnixStream) -> u32 {
    loop {
        match read_frame::<ClientMsg>(s).expect("frame") {
            Some(ClientMsg::Register { queue, .. }) => return queue,
            Some(_) => {}
            None => panic!("the agent hung up before registering"),
        }
    }
}

#[test]
fn a_daemon_that_falls_silent_is_given_up_and_its_suspended_queue_resumes() {
    let (listener, path) = socket("silent");
    let rt = global(&path);
    let device = CpuDevice::new(1).expect("device");
    let queue = rt
        .create_queue(Arc::new(device.create_queue()), QueueOptions::default())
        .expect("queue");
    let mut first = welcome(&listener);
    let id = registered(&mut first);
    write_frame(&mut first, &DaemonMsg::Suspend { queue: id }).expect("suspend");
    let suspended_at = Instant::now();
    // From here on this "daemon" reads (so the agent's writes never block) and says nothing.
    let mut reader = first.try_clone().expect("clone");
    let drain =
        std::thread::spawn(move || while let Ok(Some(_)) = read_frame::<ClientMsg>(&mut reader) {});
    std::thread::sleep(Duration::from_millis(50));
    let ran = Arc::new(AtomicU32::new(0));
    let counter = ran.clone();
    let cmd = queue
        .submit(CpuCommand::host(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        }))
        .expect("submit");
    cmd.wait_timeout(Duration::from_secs(30))
        .expect("the queue resumes once the agent gives up on the silent daemon")
        .expect("completes");
    let resumed_after = suspended_at.elapsed();
    eprintln!("a silent daemon's suspended queue ran {resumed_after:?} after the suspend");
    // Designed to give up within 750 ms; an agent that never gave up would never run it (the
    // wait above fails). 7.5 s is 10 times the design, so only a give-up that is an order of
    // magnitude late fails here, never a slow machine.
    assert!(
        resumed_after < Duration::from_millis(7_500),
        "the agent waited {resumed_after:?} on a silent daemon (designed: at most 750 ms)"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 1, "ran exactly once");
    // The agent comes back on a new connection and registers the queue again.
    let mut second = welcome(&listener);
    assert_eq!(registered(&mut second), id);
    drop((first, second));
    let _ = drain.join();
}

#[test]
fn a_daemon_that_refuses_is_retried_rarely_not_in_a_loop() {
    let (listener, path) = socket("refusing");
    listener.set_nonblocking(true).expect("nonblocking");
    let rt = global(&path);
    let device = CpuDevice::new(1).expect("device");
    let queue = rt
        .create_queue(Arc::new(device.create_queue()), QueueOptions::default())
        .expect("queue");
    let start = Instant::now();
    let mut attempts = 0;
    while start.elapsed() < Duration::from_secs(2) {
        match listener.accept() {
            Ok((mut s, _)) => {
                s.set_nonblocking(false).expect("blocking");
                let _ = read_frame::<ClientMsg>(&mut s);
                let message = "protocol version 3 unsupported; this daemon speaks 99".to_string();
                let _ = write_frame(&mut s, &DaemonMsg::Error { message });
                attempts += 1;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    assert_eq!(
        attempts, 1,
        "one attempt in two seconds (retries every 5 s after a refusal), not one every 200 ms"
    );
    // Meanwhile the queue runs unscheduled.
    queue
        .submit(CpuCommand::host(|| {}))
        .expect("submit")
        .wait()
        .expect("runs without a daemon");
}
