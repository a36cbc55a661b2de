#!/bin/sh
# peer_certs.sh DIR — makes throwaway certificates for the peer TLS tests in
# DIR (which must exist): two CAs (ca1, ca2) and node certificates signed by
# them: node-a and node-b by ca1, intruder by ca2. Each node certificate
# carries IP SAN 127.0.0.1 and DNS SAN localhost and both the serverAuth and
# clientAuth usages (a daemon is server and client of its peers). Keys are
# P-256, unencrypted, valid two days: for tests only, never commit them.
set -eu
dir=$1
cd "$dir"
umask 077
cat > node.cnf <<'CNF'
[node]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
CNF
for ca in ca1 ca2; do
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -keyout "$ca.key" -out "$ca.pem" -subj "/CN=zppd test $ca" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
done
node() {
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$1.key" -out "$1.csr" -subj "/CN=$1" 2>/dev/null
    openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 2 \
        -extfile node.cnf -extensions node -out "$1.pem" 2>/dev/null
    rm -f "$1.csr"
}
node node-a ca1
node node-b ca1
node intruder ca2
