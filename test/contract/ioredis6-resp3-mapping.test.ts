import { IOREDIS_6_RESP3_MAPPING } from '../helpers/client-cells.js';
import { clientCellContract } from './client-cell-contract.js';

clientCellContract(IOREDIS_6_RESP3_MAPPING);
