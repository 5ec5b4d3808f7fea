// SPDX-License-Identifier: MIT
//! A tokio server awaiting GPU streams, three ways, on one GPU:
//!
//!   cuflag          `client.synchronize_async(stream).await`
//!   spawn_blocking  `spawn_blocking(cuStreamSynchronize).await`
//!   poll            `cuStreamQuery` until done, `yield_now().await` between
//!
//! Each of N requests in flight is a task with a stream of its own, in a
//! closed loop: queue a kernel of a fixed length (`--kernel-us`, %globaltimer
//! spin), await the stream, again. Printed per way and N: requests/s,
//! p50/p99 of queue-to-awake latency, and CPU per request (this process,
//! cuflagd's, and their sum), then the ratios cuflag/spawn_blocking
//! (req/s, CPU) and cuflag/poll (p50) against their targets.
//!
//!     CUFLAGD=build/daemon/cuflagd cargo run --release --features cuda \
//!         --example bench -- [--kernel-us 100] [--seconds 1] [--workers 4] \
//!         [--inflight 1,2,4,8,16,32,64]
//!
//! It starts its own cuflagd ($CUFLAGD, else build/daemon/cuflagd).
//!
//! It runs with `CUDA_DEVICE_MAX_CONNECTIONS=32` unless that is set: the
//! driver's default of 8 hardware queues puts several streams on each, and
//! a flag written after a kernel holds its queue until the kernel ends, so
//! with more streams than queues a stream's kernel waits behind another's
//! (docs/bench-log/2026-12-01-rust-tokio-server-h200.md).

#[path = "../tests/support/daemon.rs"]
mod daemon;
#[path = "../tests/support/driver.rs"]
mod driver;

use std::sync::Arc;
use std::time::{Duration, Instant};

use driver::{Gpu, CUDA_ERROR_NOT_READY, CUDA_SUCCESS};

#[derive(Clone, Copy, PartialEq)]
enum Way {
    Cuflag,
    SpawnBlocking,
    Poll,
}

const WAYS: [(Way, &str); 3] = [
    (Way::Cuflag, "cuflag"),
    (Way::SpawnBlocking, "spawn_blocking"),
    (Way::Poll, "poll"),
];

struct Opts {
    kernel_ns: u64,
    seconds: f64,
    workers: usize,
    inflight: Vec<usize>,
}

fn opts() -> Opts {
    let mut o = Opts {
        kernel_ns: 100_000,
        seconds: 1.0,
        workers: 4,
        inflight: vec![1, 2, 4, 8, 16, 32, 64],
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let v = pair.get(1).map(String::as_str).unwrap_or("");
        match pair[0].as_str() {
            "--kernel-us" => o.kernel_ns = v.parse::<u64>().expect("--kernel-us N") * 1000,
            "--seconds" => o.seconds = v.parse().expect("--seconds S"),
            "--workers" => o.workers = v.parse().expect("--workers N"),
            "--inflight" => {
                o.inflight = v
                    .split(',')
                    .map(|n| n.parse().expect("--inflight N,N"))
                    .collect()
            }
            a => panic!("unknown argument {} (see the example's doc comment)", a),
        }
    }
    o
}

/// CPU seconds a process has used (utime + stime of /proc/PID/stat).
fn cpu_s(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid)).expect("/proc stat");
    // Fields after the command name, which may hold spaces, in parentheses.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / clock_ticks()
}

fn clock_ticks() -> f64 {
    extern "C" {
        fn sysconf(name: i32) -> i64;
    }
    const SC_CLK_TCK: i32 = 2;
    unsafe { sysconf(SC_CLK_TCK) as f64 }
}

struct Cell {
    rps: f64,
    p50_us: f64,
    p99_us: f64,
    cpu_us: f64,
    daemon_us: f64,
}

/// One request: the kernel, then the way's await. Returns its latency.
async fn request(way: Way, g: &Arc<Gpu>, c: &cuflag::Client, s: usize, kernel_ns: u64) -> Duration {
    // The raw handle is made where it is used, in statements of their own:
    // a pointer held across an await (rustc 1.63 counts a statement's
    // temporaries) would make the future !Send.
    let t0 = Instant::now();
    g.busy(s as cuflag::CUstream, kernel_ns);
    match way {
        Way::Cuflag => {
            let synced = c.synchronize_async(s as cuflag::CUstream);
            synced.await.expect("synchronize_async");
        }
        Way::SpawnBlocking => {
            let g2 = g.clone();
            let rc = tokio::task::spawn_blocking(move || g2.synchronize(s as cuflag::CUstream))
                .await
                .expect("blocking task");
            assert_eq!(rc, CUDA_SUCCESS, "cuStreamSynchronize");
        }
        Way::Poll => loop {
            let rc = g.query(s as cuflag::CUstream);
            match rc {
                CUDA_SUCCESS => break,
                CUDA_ERROR_NOT_READY => tokio::task::yield_now().await,
                e => panic!("cuStreamQuery: CUDA error {}", e),
            }
        },
    }
    t0.elapsed()
}

/// What every cell of the table runs on.
struct Server {
    rt: tokio::runtime::Runtime,
    gpu: Arc<Gpu>,
    client: cuflag::Client,
    streams: Vec<usize>,
    kernel_ns: u64,
    window: Duration,
    daemon_pid: String,
}

/// N requests in flight awaited one way: a warm-up, then the measure.
fn run_cell(srv: &Server, way: Way, n: usize) -> Cell {
    let (rt, g, c, kernel_ns) = (&srv.rt, &srv.gpu, &srv.client, srv.kernel_ns);
    let (streams, window, daemon_pid) = (&srv.streams, srv.window, srv.daemon_pid.as_str());
    let go = |window: Duration| {
        rt.block_on(async {
            let end = Instant::now() + window;
            let tasks: Vec<_> = streams[..n]
                .iter()
                .map(|&s| {
                    let (g, c) = (g.clone(), c.clone());
                    tokio::spawn(async move {
                        let mut lat = Vec::new();
                        while Instant::now() < end {
                            lat.push(request(way, &g, &c, s, kernel_ns).await);
                        }
                        lat
                    })
                })
                .collect();
            let mut all = Vec::new();
            for t in tasks {
                all.extend(t.await.expect("request task"));
            }
            all
        })
    };
    go(window / 5); // warm: slots made, threads started
    let (cpu0, d0, t0) = (cpu_s("self"), cpu_s(daemon_pid), Instant::now());
    let mut lat = go(window);
    let (secs, cpu, dcpu) = (
        t0.elapsed().as_secs_f64(),
        cpu_s("self") - cpu0,
        cpu_s(daemon_pid) - d0,
    );
    lat.sort_unstable();
    let pct = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e6;
    let reqs = lat.len() as f64;
    Cell {
        rps: reqs / secs,
        p50_us: pct(0.5),
        p99_us: pct(0.99),
        cpu_us: cpu / reqs * 1e6,
        daemon_us: if way == Way::Cuflag {
            dcpu / reqs * 1e6
        } else {
            0.0
        },
    }
}

/// Hardware queues the bench asks the driver for, unless the environment
/// names a number: one a stream, up to 32.
const CONNECTIONS: &str = "32";

fn main() {
    let o = opts();
    // Read by the driver when it makes the context: set before Gpu::open,
    // while this is the only thread.
    if std::env::var_os("CUDA_DEVICE_MAX_CONNECTIONS").is_none() {
        std::env::set_var("CUDA_DEVICE_MAX_CONNECTIONS", CONNECTIONS);
    }
    let g = match Gpu::open() {
        Some(g) => Arc::new(g),
        None => {
            eprintln!("bench: no CUDA driver or no GPU");
            std::process::exit(77);
        }
    };
    let d = daemon::Daemon::start(&[]);
    let c = cuflag::Client::connect(Some(&d.socket)).expect("connect");
    let rt = {
        let g = g.clone();
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(o.workers)
            .on_thread_start(move || g.make_current())
            .enable_all()
            .build()
            .unwrap()
    };
    let most = *o.inflight.iter().max().unwrap();
    let streams: Vec<usize> = (0..most).map(|_| g.stream() as usize).collect();
    let srv = Server {
        rt,
        gpu: g.clone(),
        client: c,
        streams,
        kernel_ns: o.kernel_ns,
        window: Duration::from_secs_f64(o.seconds),
        daemon_pid: d.pid().to_string(),
    };
    println!(
        "GPU: {}; kernel {} us; {} s per cell; tokio multi-thread, {} workers; \
         CUDA_DEVICE_MAX_CONNECTIONS={}; cuflag {}",
        g.name,
        o.kernel_ns / 1000,
        o.seconds,
        o.workers,
        std::env::var("CUDA_DEVICE_MAX_CONNECTIONS").unwrap_or_default(),
        cuflag::library_version()
    );
    println!(
        "{:<15} {:>8} {:>10} {:>9} {:>9} {:>11} {:>11} {:>11}",
        "way", "inflight", "req/s", "p50 us", "p99 us", "cpu us/req", "daemon us", "total us"
    );
    let mut ratios = Vec::new();
    for &n in &o.inflight {
        let mut cells = Vec::new();
        for &(way, name) in &WAYS {
            let cell = run_cell(&srv, way, n);
            println!(
                "{:<15} {:>8} {:>10.0} {:>9.1} {:>9.1} {:>11.2} {:>11.2} {:>11.2}",
                name,
                n,
                cell.rps,
                cell.p50_us,
                cell.p99_us,
                cell.cpu_us,
                cell.daemon_us,
                cell.cpu_us + cell.daemon_us
            );
            cells.push(cell);
        }
        let (cf, sb, po) = (&cells[0], &cells[1], &cells[2]);
        ratios.push((
            n,
            cf.rps / sb.rps,
            (cf.cpu_us + cf.daemon_us) / sb.cpu_us,
            cf.cpu_us / sb.cpu_us,
            cf.p50_us / po.p50_us,
        ));
    }
    println!("\nratios (targets: req/s >= 1.5, CPU <= 0.5 with the daemon's, p50 <= 1.2)");
    println!(
        "{:>8} {:>18} {:>18} {:>22} {:>14}",
        "inflight", "req/s cf/sb", "cpu cf+d/sb", "cpu cf/sb (process)", "p50 cf/poll"
    );
    let mark = |ok: bool| if ok { "ok" } else { "MISS" };
    for (n, rps, cpu, cpu_proc, p50) in ratios {
        println!(
            "{:>8} {:>13.2} {:>4} {:>13.2} {:>4} {:>22.2} {:>9.2} {:>4}",
            n,
            rps,
            mark(rps >= 1.5),
            cpu,
            mark(cpu <= 0.5),
            cpu_proc,
            p50,
            mark(p50 <= 1.2)
        );
    }
    let streams = srv.streams.clone();
    drop(srv);
    for s in streams {
        g.destroy(s as cuflag::CUstream);
    }
}
