//! A TCP proxy in front of a redis-server that can lose a reply: armed, it forwards the next
//! request and then, instead of the server's reply, cuts the connection. The command ran on
//! the server; the client only learns that the connection dropped (an unknown outcome).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;

/// A proxy listening on 127.0.0.1; it runs until the test process ends.
pub struct Proxy {
    port: u16,
    armed: Arc<AtomicBool>,
    cuts: Arc<AtomicUsize>,
}

impl Proxy {
    /// A proxy to the server at `127.0.0.1:server_port`.
    pub fn start(server_port: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port for the proxy");
        let port = listener.local_addr().unwrap().port();
        let armed = Arc::new(AtomicBool::new(false));
        let cuts = Arc::new(AtomicUsize::new(0));
        let (a, c) = (armed.clone(), cuts.clone());
        thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(("127.0.0.1", server_port)) else {
                    continue;
                };
                let (a, c) = (a.clone(), c.clone());
                thread::spawn(move || pump(client, server, a, c));
            }
        });
        Proxy { port, armed, cuts }
    }

    /// `redis://127.0.0.1:PORT/0` through the proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// The next reply the server sends (on any connection) is thrown away and the connection
    /// cut.
    pub fn lose_next_reply(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    /// Replies lost so far.
    pub fn cuts(&self) -> usize {
        self.cuts.load(Ordering::SeqCst)
    }
}

/// Forwards both ways; the server-to-client side cuts both sockets when armed.
fn pump(client: TcpStream, server: TcpStream, armed: Arc<AtomicBool>, cuts: Arc<AtomicUsize>) {
    let (Ok(mut client_in), Ok(mut server_out)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        while let Ok(n) = client_in.read(&mut buf) {
            if n == 0 || server_out.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = server_out.shutdown(Shutdown::Both);
    });
    let (mut server_in, mut client_out) = (server, client);
    let mut buf = [0u8; 16 * 1024];
    while let Ok(n) = server_in.read(&mut buf) {
        if n == 0 {
            break;
        }
        if armed.swap(false, Ordering::SeqCst) {
            cuts.fetch_add(1, Ordering::SeqCst);
            break;
        }
        if client_out.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = client_out.shutdown(Shutdown::Both);
    let _ = server_in.shutdown(Shutdown::Both);
}
