# moto's server, with its DynamoDB requests taken one at a time.
#
# moto serves requests on parallel threads and does not isolate DynamoDB transactions
# from each other (a cancelled transaction even restores a stale copy of the table), so
# concurrent conditional writes would race inside the emulator. Real DynamoDB runs
# transactions serializably; one DynamoDB request at a time gives that guarantee. Other
# services stay parallel (an SQS long poll would otherwise block everyone).
# Arguments are moto_server's: -H HOST -p PORT.
import sys
import threading

import moto.server as server

lock = threading.Lock()
run = server.run_simple


def serial_run(host, port, app, **options):
    def serial(environ, start_response):
        if environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
            with lock:
                return list(app(environ, start_response))
        return app(environ, start_response)

    run(host, port, serial, **options)


server.run_simple = serial_run
server.main(sys.argv[1:])
