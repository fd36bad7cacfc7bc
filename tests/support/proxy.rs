//! A TCP proxy in front of the API server that can cut one client off: the exporter
//! loses its connections while the API server and the controller carry on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

pub struct Proxy {
    pub port: u16,
    open: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<AbortHandle>>>,
    accept_loop: AbortHandle,
}

impl Proxy {
    pub async fn start(target_port: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let open = Arc::new(AtomicBool::new(true));
        let connections = Arc::new(Mutex::new(Vec::new()));
        let accept_loop = tokio::spawn({
            let (open, connections) = (open.clone(), connections.clone());
            async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    if !open.load(Ordering::SeqCst) {
                        continue; // dropped: the client sees its connection closed at once
                    }
                    let forward = tokio::spawn(async move {
                        if let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", target_port)).await {
                            let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    });
                    connections.lock().unwrap().push(forward.abort_handle());
                }
            }
        })
        .abort_handle();
        Self { port, open, connections, accept_loop }
    }

    /// Close every connection and refuse new ones until `restore`.
    pub fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        for connection in self.connections.lock().unwrap().drain(..) {
            connection.abort();
        }
    }

    pub fn restore(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.accept_loop.abort();
    }
}
