//! A TCP proxy in front of the API server that can cut one client off, or freeze it: the
//! exporter loses its connections (or hears nothing on them) while the API server and the
//! controller carry on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

pub struct Proxy {
    pub port: u16,
    open: Arc<AtomicBool>,
    frozen: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<AbortHandle>>>,
    accept_loop: AbortHandle,
}

/// Copy `from` to `to` chunk by chunk, holding each chunk while `frozen`.
async fn pump(mut from: impl AsyncRead + Unpin, mut to: impl AsyncWrite + Unpin, frozen: Arc<AtomicBool>) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let Ok(n) = from.read(&mut buffer).await else { return };
        if n == 0 {
            let _ = to.shutdown().await;
            return;
        }
        while frozen.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}

impl Proxy {
    /// A proxy in front of the lab's API server, and a copy of the exporter's kubeconfig that
    /// reaches the API server only through it.
    pub async fn for_exporter(cp: &super::cluster::ControlPlane) -> (Self, String) {
        let server = cp.get("KUBE_SERVER");
        let api_port: u16 = server.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap();
        let proxy = Self::start(api_port).await;
        let kubeconfig = cp.dir.join("exporter-via-proxy.kubeconfig");
        let original = std::fs::read_to_string(cp.get("EXPORTER_KUBECONFIG")).unwrap();
        std::fs::write(&kubeconfig, original.replace(server, &format!("https://127.0.0.1:{}", proxy.port))).unwrap();
        (proxy, kubeconfig.to_str().unwrap().to_owned())
    }

    pub async fn start(target_port: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let open = Arc::new(AtomicBool::new(true));
        let frozen = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(Mutex::new(Vec::new()));
        let accept_loop = tokio::spawn({
            let (open, frozen, connections) = (open.clone(), frozen.clone(), connections.clone());
            async move {
                while let Ok((inbound, _)) = listener.accept().await {
                    if !open.load(Ordering::SeqCst) {
                        continue; // dropped: the client sees its connection closed at once
                    }
                    let frozen = frozen.clone();
                    let forward = tokio::spawn(async move {
                        if let Ok(outbound) = TcpStream::connect(("127.0.0.1", target_port)).await {
                            let (client_read, client_write) = inbound.into_split();
                            let (server_read, server_write) = outbound.into_split();
                            tokio::join!(
                                pump(client_read, server_write, frozen.clone()),
                                pump(server_read, client_write, frozen)
                            );
                        }
                    });
                    connections.lock().unwrap().push(forward.abort_handle());
                }
            }
        })
        .abort_handle();
        Self { port, open, frozen, connections, accept_loop }
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

    /// Keep every connection open and pass nothing either way until `thaw`: a stalled
    /// stream, as a broken middlebox leaves it.
    pub fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
    }

    /// End a freeze as a middlebox that recovers does: the connections it held are reset
    /// (their state is gone), and new ones pass again.
    pub fn thaw(&self) {
        for connection in self.connections.lock().unwrap().drain(..) {
            connection.abort();
        }
        self.frozen.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.accept_loop.abort();
    }
}
