import Hummingbird
import NIOCore

/// `/metrics` in the Prometheus text format (``DaemonMetrics``).
enum MetricsRoutes {
    static func add(to router: some RouterMethods<BasicRequestContext>, view: StatusView, metrics: DaemonMetrics) {
        router.get("metrics") { _, _ in
            let bytes = metrics.exposition(view.snapshot())
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
        }
    }
}
