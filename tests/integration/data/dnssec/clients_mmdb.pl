#!/usr/bin/env perl
# clients_mmdb.pl OUT.mmdb — the GeoLite2-City-like database test_dnssec.py gives ternd: the
# loopback addresses its validating resolvers send from (Unbound's outgoing-interface), so
# ternd, which steers by the packet's source address, sees clients in different countries:
#   127.0.0.2/32     AU, Brisbane
#   127.0.0.3/32     GB, London
#   (127.0.0.4 and every other address: unknown, the fallback records)
# and the networks of the location-steered records, which ternd places with the same database:
#   1.2.3.0/24       AU, Brisbane
#   81.2.69.128/26   GB, London
# (tests/data/make_mmdb.pl's fixtures map nothing in 127/8, hence this one.) IPv4 tree, nested
# keys (country.iso_code, location.latitude), MaxMind::DB::Writer (libmaxmind-db-writer-perl).
# Written to OUT.tmp and renamed. Keep the addresses in step with CLIENTS in test_dnssec.py.
use strict;
use warnings;
use MaxMind::DB::Writer::Tree;

my $out = shift or die "usage: $0 OUT.mmdb\n";

my %types = (
    country   => 'map',
    location  => 'map',
    iso_code  => 'utf8_string',
    latitude  => 'double',
    longitude => 'double',
);
my $tree = MaxMind::DB::Writer::Tree->new(
    database_type            => 'GeoLite2-City',
    description              => { en => 'tern test fixture: test_dnssec.py clients' },
    languages                => ['en'],
    ip_version               => 4,
    record_size              => 24,
    remove_reserved_networks => 0,    # 127/8 is the point
    map_key_type_callback    => sub { $types{ $_[0] } // die "no type for key $_[0]\n" },
);

sub place {
    my ( $iso, $lat, $lon ) = @_;
    return { country => { iso_code => $iso }, location => { latitude => $lat, longitude => $lon } };
}

my $brisbane = place( 'AU', -27.4679, 153.0281 );
my $london   = place( 'GB', 51.5142,  -0.0931 );
$tree->insert_network( '127.0.0.2/32',   $brisbane );
$tree->insert_network( '127.0.0.3/32',   $london );
$tree->insert_network( '1.2.3.0/24',     $brisbane );
$tree->insert_network( '81.2.69.128/26', $london );

open my $fh, '>:raw', "$out.tmp" or die "$out.tmp: $!\n";
$tree->write_tree($fh);
close $fh or die "$out.tmp: $!\n";
rename "$out.tmp", $out or die "rename $out: $!\n";
