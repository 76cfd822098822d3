#!/usr/bin/env bash
# scripts/gen-dev-certs.sh — a throwaway CA and certificates for trying
# Nereus' TLS listeners on loopback. NOT for production: the keys are
# unencrypted files and the CA lives next to them.
#
#   scripts/gen-dev-certs.sh [DIR] [CLIENT_NAME...]
#
# DIR (default ./nereus-certs) receives:
#   ca.pem, ca-key.pem            the CA (trust ca.pem in clients)
#   server.pem, server-key.pem    for --tls-cert-file / --tls-key-file,
#                                 valid for localhost, 127.0.0.1 and ::1
#   <name>.pem, <name>-key.pem    a client certificate with CN=<name> for
#                                 each CLIENT_NAME (default: admin) — for
#                                 --tls-client-auth and Pulsar TLS auth
#   truststore.p12                ca.pem as a PKCS#12 trust store for Java
#                                 clients (password: changeit)
# Re-running replaces the server and client certificates but keeps the CA.
set -euo pipefail

DIR=${1:-./nereus-certs}
shift || true
CLIENTS=("$@")
[ ${#CLIENTS[@]} -eq 0 ] && CLIENTS=(admin)
DAYS=${NEREUS_CERT_DAYS:-30}

command -v openssl >/dev/null || {
	echo "openssl is needed (apt-get install openssl)" >&2
	exit 1
}
mkdir -p "$DIR"
cd "$DIR"
umask 077

if [ ! -f ca.pem ]; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days "$DAYS" \
		-keyout ca-key.pem -out ca.pem -subj "/O=Nereus dev/CN=Nereus dev CA" \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
	echo "created CA ca.pem"
fi

issue() { # name cn ext
	local name=$1 cn=$2 ext=$3
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$name-key.pem" \
		-out "$name.csr" -subj "/O=Nereus dev/CN=$cn" 2>/dev/null
	printf '%b' "$ext" >"$name.ext"
	openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days "$DAYS" \
		-extfile "$name.ext" -out "$name.pem" 2>/dev/null
	rm -f "$name.csr" "$name.ext"
	echo "issued $name.pem (CN=$cn)"
}

issue server localhost "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature"
for c in "${CLIENTS[@]}"; do
	issue "$c" "$c" "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature"
done
if command -v keytool >/dev/null; then
	rm -f truststore.p12
	keytool -importcert -noprompt -alias nereus-dev-ca -file ca.pem -keystore truststore.p12 \
		-storetype PKCS12 -storepass changeit >/dev/null
	echo "wrote truststore.p12 (password changeit) for Java clients"
fi
chmod 644 ./*.pem
chmod 600 ./*-key.pem
echo "done: $(pwd)"
