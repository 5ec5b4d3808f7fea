// SPDX-License-Identifier: MIT
//! Completions across clients: a slot exported as an fd, imported by
//! another client and a group, counted once each; EPERM and EPIPE.

mod support;

use std::time::Duration;

use cuflag::{errno, Client};
use support::daemon::Daemon;

#[test]
fn export_import_revoke() {
    let d = Daemon::start(&[]);
    let e = Client::connect(Some(&d.socket)).unwrap();
    let i = Client::connect(Some(&d.socket)).unwrap();
    let s = e.acquire().unwrap();
    let fd = s.export().unwrap();
    let is = i.import_slot(&fd).unwrap();
    let g = i.group().unwrap();
    let gs = g.import_slot(&fd).unwrap();
    drop(fd);
    assert_eq!(is.arm().unwrap_err().errno(), errno::EPERM);
    assert_eq!(is.export().unwrap_err().errno(), errno::EPERM);
    let t = s.arm_many(3).unwrap() + 2;
    s.complete(t).unwrap();
    is.wait(t, Some(Duration::from_secs(5))).unwrap();
    let mut n = 0;
    while n < 3 {
        n += is.consume().unwrap();
    }
    assert_eq!(n, 3);
    gs.wait(t, Some(Duration::from_secs(5))).unwrap();
    drop(s);
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    loop {
        match is.consume() {
            Err(err) if err.errno() == errno::EPIPE => break,
            Ok(_) => assert!(std::time::Instant::now() < deadline, "no EPIPE within 1 s"),
            Err(err) => panic!("{}", err),
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(is.wait(t + 1, None).unwrap_err().errno(), errno::EPIPE);
}
