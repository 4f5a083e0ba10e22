import Hummingbird
import Logging
import ServiceLifecycle

/// The HTTP server of `ampel run`: a Hummingbird application run as a service beside the
/// daemon. It reads the ``StatusView`` and never touches the daemon's loop.
enum HTTPServer {
    /// The server on `address`; it logs `serving HTTP on http://host:port/` once it listens
    /// (with the port the system chose for port 0) and then calls `listening`.
    static func make(_ context: HTTPRoutes.Context, address: HTTPListenAddress, logger: Logger,
                            listening: @escaping @Sendable () -> Void = {}) -> some Service {
        Application(
            router: HTTPRoutes.router(context),
            configuration: ApplicationConfiguration(address: .hostname(address.host, port: address.port), serverName: "ampel/\(AmpelDaemon.version)"),
            onServerRunning: { channel in
                let bound = HTTPListenAddress(host: address.host, port: channel.localAddress?.port ?? address.port)
                logger.info("serving HTTP on http://\(bound)/")
                listening()
            },
            logger: logger)
    }
}
