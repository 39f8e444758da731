#!/usr/bin/env perl
# make_mmdb.pl OUTDIR — writes the small MaxMind DB fixtures test_geoip.c expects
# (MaxMind::DB::Writer, Debian package libmaxmind-db-writer-perl):
#   nested6.mmdb  GeoLite2-City-like, IPv6 with the IPv4 subtree (aliased), 28-bit records,
#                 nested keys, double coordinates;
#   flat4.mmdb    ip-location-db-like "city ipv4", 24-bit records, flat keys, float coordinates;
#   flat6.mmdb    "city ipv6", IPv6 only (no IPv4 subtree), 32-bit records, flat keys, coordinates
#                 as decimal strings;
#   asn.mmdb      GeoLite2-ASN-like: neither layout (must be refused);
#   shape.mmdb    "country" and "latitude"-like names of the wrong shape (a country string, no
#                 location map): neither layout either.
# and the ASN databases test_asn_compile.c and the ASN tests compile (autonomous_system_number,
# autonomous_system_organization at the top of each record, as GeoLite2-ASN and ip-location-db's
# asn mmdb packages both store them):
#   asn_geolite.mmdb   GeoLite2-ASN-like: IPv6 tree, IPv4 subtree at ::/96 aliased from
#                      ::ffff:0:0/96, 2001::/32 and 2002::/16, 28-bit records;
#   asn_geolite_b.mmdb the same with 81.2.69.0/24 moved from AS64500 to AS64501 (a "new release");
#   asn_flat4.mmdb     ip-location-db asn-ipv4.mmdb-like: IPv4 tree, 24-bit records, adjacent
#                      networks of one ASN (merged by the compiler), a /32, ASN 0;
#   asn_flat6.mmdb     ip-location-db asn-ipv6.mmdb-like: IPv6 tree without aliases, 32-bit
#                      records, IPv4 data stored as IPv4-mapped ::ffff:a.b.c.d networks;
#   asn_random.mmdb    3000 random, partly nested networks of both families (seeded), IPv6 tree
#                      with aliases: test_asn_compile.c checks the compiled table against
#                      libmaxminddb's own lookups;
#   asn_bad_type.mmdb  autonomous_system_number as a string;
#   asn_bad_range.mmdb autonomous_system_number above 2^32 (uint64).
# The networks and values are mirrored in test_geoip.c and test_asn_compile.c; change both
# together.
# Each file is written to NAME.tmp and renamed, so a reader never sees half a file.
use strict;
use warnings;
use MaxMind::DB::Writer::Tree;

my $out = shift or die "usage: $0 OUTDIR\n";
-d $out or mkdir $out or die "mkdir $out: $!\n";

sub write_db {
    my ( $name, %args ) = @_;
    my $types    = delete $args{types};
    my $networks = delete $args{networks};
    my $tree     = MaxMind::DB::Writer::Tree->new(
        description              => { en => "tern test fixture $name" },
        languages                => ['en'],
        remove_reserved_networks => 0,
        map_key_type_callback    => sub { $types->{ $_[0] } // die "no type for key $_[0]\n" },
        %args,
    );
    for ( my $i = 0; $i < @$networks; $i += 2 ) {
        $tree->insert_network( $networks->[$i], $networks->[ $i + 1 ] );
    }
    my $path = "$out/$name";
    open my $fh, '>:raw', "$path.tmp" or die "$path.tmp: $!\n";
    $tree->write_tree($fh);
    close $fh or die "$path.tmp: $!\n";
    rename "$path.tmp", $path or die "rename $path: $!\n";
}

# --- nested (GeoIP2 / GeoLite2 City) ------------------------------------------------------------
my %nested_types = (
    city                 => 'map',
    continent            => 'map',
    country              => 'map',
    registered_country   => 'map',
    location             => 'map',
    postal               => 'map',
    subdivisions         => [ 'array', 'map' ],
    names                => 'map',
    en                   => 'utf8_string',
    de                   => 'utf8_string',
    code                 => 'utf8_string',
    iso_code             => 'utf8_string',
    geoname_id           => 'uint32',
    is_in_european_union => 'boolean',
    accuracy_radius      => 'uint16',
    latitude             => 'double',
    longitude            => 'double',
    time_zone            => 'utf8_string',
);

sub geo_country {
    my ( $iso, $id, $name ) = @_;
    return { geoname_id => $id, iso_code => $iso, names => { en => $name, de => $name } };
}

sub geo_city {
    my (%a) = @_;
    return {
        city => { geoname_id => $a{city_id}, names => { en => $a{city}, de => $a{city} } },
        continent => { code => $a{cont}, geoname_id => 6255148, names => { en => $a{cont} } },
        ( $a{country} ? ( country => $a{country} ) : () ),
        ( $a{location} ? ( location => $a{location} ) : () ),
        postal             => { code => '0000' },
        registered_country => $a{registered},
        subdivisions =>
          [ { geoname_id => 1, iso_code => 'XX', names => { en => 'Somewhere' } } ],
    };
}

my $au = geo_country( 'AU', 2077456, 'Australia' );
my $gb = geo_country( 'GB', 2635167, 'United Kingdom' );
my $de = geo_country( 'DE', 2921044, 'Germany' );
my $fr = geo_country( 'FR', 3017382, 'France' );
my $se = geo_country( 'SE', 2661886, 'Sweden' );
my $nl = geo_country( 'NL', 2750405, 'Netherlands' );
my $za = geo_country( 'ZA', 953987,  'South Africa' );

write_db(
    'nested6.mmdb',
    ip_version         => 6,
    record_size        => 28,
    database_type      => 'GeoLite2-City',
    alias_ipv6_to_ipv4 => 1,
    types              => \%nested_types,
    networks           => [
        '1.2.3.0/24' => geo_city(
            city_id => 2174003, city => 'Brisbane', cont => 'OC', country => $au,
            registered => $au,
            location   => {
                accuracy_radius => 100, latitude => -27.4679, longitude => 153.0281,
                time_zone       => 'Australia/Brisbane'
            },
        ),
        '81.2.69.128/26' => geo_city(
            city_id => 2643743, city => 'London', cont => 'EU', country => $gb,
            registered => $gb,
            location => { accuracy_radius => 10, latitude => 51.5142, longitude => -0.0931 },
        ),
        # no country: registered_country answers
        '5.6.0.0/16' => geo_city(
            city_id => 0, city => '', cont => 'EU', registered => $de,
            location => { latitude => 52.5, longitude => 13.4 },
        ),
        # latitude without longitude: no location
        '9.9.9.0/24' => geo_city(
            city_id => 0, city => '', cont => 'EU', country => $fr, registered => $fr,
            location => { latitude => 48.8 },
        ),
        '2a02:1234::/32' => geo_city(
            city_id => 2673730, city => 'Stockholm', cont => 'EU', country => $se,
            registered => $se,
            location => { accuracy_radius => 50, latitude => 59.3293, longitude => 18.0686 },
        ),
        # latitude out of range
        '2a03::/16' => geo_city(
            city_id => 0, city => '', cont => 'EU', country => $nl, registered => $nl,
            location => { latitude => 91.0, longitude => 4.9 },
        ),
        # NaN latitude
        '2c0f:f000::/20' => geo_city(
            city_id => 0, city => '', cont => 'AF', country => $za, registered => $za,
            location => { latitude => 9**9**9 / 9**9**9, longitude => 18.4 },
        ),
    ],
);

# --- flat (ip-location-db) --------------------------------------------------------------------
sub flat {
    my ( $cc, $lat, $lon, $city ) = @_;
    return {
        city         => $city // '',
        country_code => $cc,
        latitude     => $lat,
        longitude    => $lon,
        postcode     => '',
        state1       => '',
        state2       => '',
        timezone     => '',
    };
}
my %flat_types = map { $_ => 'utf8_string' } qw(city country_code postcode state1 state2 timezone);

write_db(
    'flat4.mmdb',
    ip_version    => 4,
    record_size   => 24,
    database_type => 'city ipv4',
    types         => { %flat_types, latitude => 'float', longitude => 'float' },
    networks      => [
        '1.2.3.0/24'      => flat( 'AU', -27.4679, 153.0281, 'Brisbane' ),
        '81.2.69.128/26'  => flat( 'GB', 51.5142,  -0.0931,  'London' ),
        '100.64.0.0/10'   => flat( 'us', 37.751,   -97.822 ),                # lower case → US
        '198.51.100.0/24' => flat( 'U1', 10.0,     200.0 ),                  # bad code, bad lon
        '203.0.113.0/24'  => flat( 'USA', -33.9,   151.2 ),                  # 3 letters
    ],
);

write_db(
    'flat6.mmdb',
    ip_version    => 6,
    record_size   => 32,
    database_type => 'city ipv6',
    types         => { %flat_types, latitude => 'utf8_string', longitude => 'utf8_string' },
    networks      => [
        '2a02:1234::/32' => flat( 'SE', '59.3293', '18.0686', 'Stockholm' ),
        '2a03:5::/48'    => flat( 'NL', '52.37',   '4.89e0' ),
        '2c0f:f000::/20' => flat( 'ZA', 'abc',     '18.4' ),                 # not a number
    ],
);

# --- neither layout -----------------------------------------------------------------------------
write_db(
    'asn.mmdb',
    ip_version    => 6,
    record_size   => 24,
    database_type => 'GeoLite2-ASN',
    types         => {
        autonomous_system_number       => 'uint32',
        autonomous_system_organization => 'utf8_string'
    },
    networks => [
        '1.2.3.0/24' =>
          { autonomous_system_number => 13335, autonomous_system_organization => 'Example' },
        '2a02:1234::/32' =>
          { autonomous_system_number => 3301, autonomous_system_organization => 'Example 6' },
    ],
);

write_db(
    'shape.mmdb',
    ip_version    => 4,
    record_size   => 24,
    database_type => 'ipinfo-like',
    types         => { country => 'utf8_string', continent => 'utf8_string', location => 'utf8_string' },
    networks      => [
        '1.2.3.0/24'     => { country => 'AU', continent => 'OC', location => '-27.4,153.0' },
        '81.2.69.128/26' => { country => 'GB', continent => 'EU', location => '51.5,-0.09' },
    ],
);

# --- ASN databases ------------------------------------------------------------------------------
my %asn_types = (
    autonomous_system_number       => 'uint32',
    autonomous_system_organization => 'utf8_string',
);

sub asn {
    my ( $number, $org ) = @_;
    return { autonomous_system_number => $number,
        ( defined $org ? ( autonomous_system_organization => $org ) : () ) };
}

# GeoLite2-ASN's shape: an IPv6 tree with the IPv4 subtree aliased, 28-bit records.
sub geolite_asn {
    my ( $name, $networks ) = @_;
    write_db(
        $name,
        ip_version         => 6,
        record_size        => 28,
        database_type      => 'GeoLite2-ASN',
        alias_ipv6_to_ipv4 => 1,
        types              => \%asn_types,
        networks           => $networks,
    );
}

sub geolite_asn_release {
    my ( $name, $london ) = @_;
    geolite_asn(
        $name,
        [
            '1.0.0.0/24'     => asn( 13335, 'CLOUDFLARENET' ),
            '1.0.4.0/22'     => asn( 38803, 'Wirefreebroadband' ),
            '8.8.8.0/24'     => asn( 15169, 'GOOGLE' ),
            '10.1.0.0/16'    => asn(64501),                               # no organization
            '81.2.69.0/24'   => asn( $london, "Example $london" ),
            '2001:4860::/32' => asn( 15169, 'GOOGLE' ),
            '2a02:1234::/32' => asn( 64502, 'Example Stockholm' ),
        ],
    );
}
geolite_asn_release( 'asn_geolite.mmdb',   64500 );
geolite_asn_release( 'asn_geolite_b.mmdb', 64501 );

write_db(
    'asn_flat4.mmdb',
    ip_version    => 4,
    record_size   => 24,
    database_type => 'asn',
    types         => \%asn_types,
    networks      => [
        '1.0.0.0/24'      => asn( 13335, 'Cloudflare, Inc.' ),
        '1.0.1.0/24'      => asn( 13335, 'Cloudflare' ),    # same ASN, another record: merged
        '9.9.9.9/32'      => asn( 19281, 'Quad9' ),
        '192.0.2.0/24'    => asn( 0,     'Not routed' ),
        '223.255.255.0/24' => asn( 4294967295, 'Largest ASN' ),
    ],
);

write_db(
    'asn_flat6.mmdb',
    ip_version    => 6,
    record_size   => 32,
    database_type => 'asn',
    types         => \%asn_types,
    networks      => [
        '::ffff:5.6.7.0/120'     => asn( 64510, 'Mapped Four' ),
        '2001:db8::/48'          => asn( 64511, 'Doc Six' ),
        '2001:db8:0:1::5/128'    => asn( 64512, 'One Address' ),
        'ffff:ffff:ffff:ffff::/64' => asn( 64513, 'Top' ),
    ],
);

write_db(
    'asn_bad_type.mmdb',
    ip_version    => 4,
    record_size   => 24,
    database_type => 'asn',
    types         => { autonomous_system_number => 'utf8_string',
        autonomous_system_organization => 'utf8_string' },
    networks      => [ '1.2.3.0/24' => { autonomous_system_number => 'AS13335' } ],
);

write_db(
    'asn_bad_range.mmdb',
    ip_version    => 4,
    record_size   => 24,
    database_type => 'asn',
    types         => { autonomous_system_number => 'uint64',
        autonomous_system_organization => 'utf8_string' },
    networks      => [
        '1.2.3.0/24' => asn( 1, 'fine' ),
        '1.2.4.0/24' => asn( 4294967296, 'too large' ),
    ],
);

# Random networks, narrower ones nested into (and replacing parts of) wider ones. Seeded: the same
# file every run. IPv4 in 10.0.0.0/8 and around, IPv6 in 2001:db8::/32 and around, lengths from
# /8 to /32 and /16 to /128 so that boundaries fall inside /64s too.
{
    srand(20261125);
    my @nets;
    for my $i ( 1 .. 2000 ) {
        my $len  = 8 + int( rand(25) );
        my $addr = ( 10 << 24 ) + int( rand( 1 << 24 ) ) + ( $i % 7 == 0 ? int( rand(8) ) << 24 : 0 );
        $addr &= ~( ( 1 << ( 32 - $len ) ) - 1 ) & 0xFFFFFFFF;
        push @nets, sprintf( '%d.%d.%d.%d/%d',
            ( $addr >> 24 ) & 255, ( $addr >> 16 ) & 255, ( $addr >> 8 ) & 255, $addr & 255, $len );
    }
    for my $i ( 1 .. 1000 ) {
        my $len = 16 + int( rand(113) );
        my @w = ( 0x2001, 0x0db8 + int( rand(4) ), map { int( rand(65536) ) } 1 .. 6 );
        for my $b ( $len .. 127 ) {    # clear the host bits
            $w[ int( $b / 16 ) ] &= ~( 1 << ( 15 - $b % 16 ) ) & 0xFFFF;
        }
        push @nets, join( ':', map { sprintf '%x', $_ } @w ) . "/$len";
    }
    @nets = sort { ( split m{/}, $a )[1] <=> ( split m{/}, $b )[1] } @nets;  # wide first: nest
    geolite_asn( 'asn_random.mmdb',
        [ map { ( $nets[$_] => asn( 1 + int( rand(40) ), 'AS ' . ( $_ % 50 ) ) ) } 0 .. $#nets ] );
}
