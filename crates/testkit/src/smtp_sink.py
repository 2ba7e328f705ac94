"""The SMTP server of the email tests: aiosmtpd on 127.0.0.1, keeping what it is sent.

Two listeners: one plain that offers STARTTLS (not required), one with TLS from the first
byte; both want AUTH with the one user and password given. Each mail taken is written to
<dir>/<n>.json (envelope, raw data, whether the connection was encrypted, who logged in),
through a temporary file renamed into place. A recipient at reject.test is refused with a
550, as a server refuses an address it does not have.

Usage: smtp_sink.py DIR CERT KEY USER PASSWORD; prints "ready <plain port> <tls port>" once
both listen, and runs until killed.
"""

import asyncio
import json
import os
import ssl
import sys

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword


def main():
    directory, cert, key, user, password = sys.argv[1:6]
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    counter = {"n": 0}

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login.decode() == user
            and auth_data.password.decode() == password
        )
        return AuthResult(success=ok, handled=False, auth_data=auth_data if ok else None)

    class Keep:
        def __init__(self, implicit_tls):
            self.implicit_tls = implicit_tls

        async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
            if address.lower().endswith("@reject.test"):
                return "550 5.1.1 no such user here"
            envelope.rcpt_tos.append(address)
            return "250 OK"

        async def handle_DATA(self, server, session, envelope):
            counter["n"] += 1
            record = {
                "mailFrom": envelope.mail_from,
                "rcptTos": envelope.rcpt_tos,
                "data": envelope.original_content.decode("utf-8", "replace"),
                "encrypted": self.implicit_tls or session.ssl is not None,
                "login": session.auth_data.login.decode() if session.authenticated else None,
            }
            path = os.path.join(directory, "%06d.json" % counter["n"])
            with open(path + ".tmp", "w") as out:
                json.dump(record, out)
            os.rename(path + ".tmp", path)
            return "250 OK: kept"

    def server(implicit_tls):
        return SMTP(
            Keep(implicit_tls),
            hostname="smtp.example.test",
            tls_context=None if implicit_tls else context,
            require_starttls=False,
            auth_required=True,
            auth_require_tls=False,
            authenticator=authenticator,
        )

    async def serve():
        loop = asyncio.get_running_loop()
        plain = await loop.create_server(lambda: server(False), "127.0.0.1", 0)
        tls = await loop.create_server(lambda: server(True), "127.0.0.1", 0, ssl=context)
        ports = [s.sockets[0].getsockname()[1] for s in (plain, tls)]
        print("ready %d %d" % tuple(ports), flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
